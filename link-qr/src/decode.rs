//! Reading a rendered code back, for tests here and in the API: a rasterised SVG or a PNG, scanned by `rqrr`. A test
//! that decodes proves the image scans; a snapshot would only prove it did not change.

use image::GenericImageView;

/// Width, height and the text of the one code in a PNG.
pub fn png(bytes: &[u8]) -> Result<(u32, u32, String), String> {
    let img = image::load_from_memory_with_format(bytes, image::ImageFormat::Png)
        .map_err(|e| e.to_string())?;
    let (w, h) = img.dimensions();
    let grey = img.to_luma8();
    scan(w, h, |x, y| grey.get_pixel(x, y)[0])
}

/// Width, height and the text of the one code in an SVG document, drawn at its own size.
pub fn svg(bytes: &[u8]) -> Result<(u32, u32, String), String> {
    let tree = resvg::usvg::Tree::from_data(bytes, &resvg::usvg::Options::default())
        .map_err(|e| e.to_string())?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("empty SVG")?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    let (w, h) = (pixmap.width(), pixmap.height());
    // Transparent pixels count as light, as on a white page.
    scan(w, h, |x, y| {
        let p = pixmap.pixel(x, y).map(|p| p.demultiply());
        p.map_or(255, |p| if p.alpha() == 0 { 255 } else { p.red() })
    })
}

/// The one code in a `w` × `h` grey image (`grey` is called with coordinates below `w` and `h`, so they fit `u32`).
fn scan(
    w: u32,
    h: u32,
    mut grey: impl FnMut(u32, u32) -> u8,
) -> Result<(u32, u32, String), String> {
    let mut prepared =
        rqrr::PreparedImage::prepare_from_greyscale(w as usize, h as usize, |x, y| {
            grey(x as u32, y as u32)
        });
    let grids = prepared.detect_grids();
    let [grid] = grids.as_slice() else {
        return Err(format!("{} codes found", grids.len()));
    };
    let (_, text) = grid.decode().map_err(|e| e.to_string())?;
    Ok((w, h, text))
}
