//! QR codes of short URLs (issue "the whole life of a link": `GET links/{id}/qr`): the request's `format` and `size`
//! checked once here, the code drawn by the `qrcode` crate and written as SVG or PNG. The API serves it; the
//! dashboard shows the same image, so it lives in neither.

use image::{ImageEncoder, Luma};
use qrcode::QrCode;
use qrcode::render::svg;

#[cfg(feature = "decode")]
pub mod decode;

/// Smallest image edge in pixels a client may ask for.
pub const MIN_SIZE: u32 = 64;
/// Largest image edge: 2048² grey pixels is 4 MiB in memory, bounded per request.
pub const MAX_SIZE: u32 = 2048;
/// The edge when the request names none.
pub const DEFAULT_SIZE: u32 = 256;
/// Light modules around the code, as the QR standard asks, so scanners find its edges.
const QUIET_ZONE: u32 = 4;

/// Why a QR request was refused; each names the parameter at fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QrError {
    /// `format` is neither `svg` nor `png`.
    #[error("format must be svg or png")]
    Format,
    /// `size` is not a whole number from [`MIN_SIZE`] to [`MAX_SIZE`].
    #[error("size must be a whole number from {MIN_SIZE} to {MAX_SIZE}")]
    Size,
    /// A parameter given twice: which one counts would be a guess.
    #[error("{0} is given more than once")]
    Repeated(&'static str),
    /// The code of this text has more modules than the image has pixels.
    #[error("size must be at least {0} for this link's code")]
    TooSmall(u32),
    /// The text does not fit in any QR code (never for a short URL: they are far below the 2,953-byte limit).
    #[error("the text is too long for a QR code")]
    TooLong,
}

/// The image kind a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Scalable; the default.
    #[default]
    Svg,
    /// `size` × `size` grey pixels.
    Png,
}

/// A checked `?format=&size=` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QrRequest {
    /// Image kind.
    pub format: Format,
    /// Edge in pixels, [`MIN_SIZE`]..=[`MAX_SIZE`].
    pub size: u32,
}

impl Default for QrRequest {
    fn default() -> Self {
        Self {
            format: Format::Svg,
            size: DEFAULT_SIZE,
        }
    }
}

impl QrRequest {
    /// Reads a raw query string. Other parameters are ignored (a cache-busting `?v=2` on an `<img>` must not
    /// break it); `format` and `size` may each appear once.
    pub fn parse(query: Option<&str>) -> Result<Self, QrError> {
        let mut req = Self::default();
        let (mut format_seen, mut size_seen) = (false, false);
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match name.as_ref() {
                "format" => {
                    if std::mem::replace(&mut format_seen, true) {
                        return Err(QrError::Repeated("format"));
                    }
                    req.format = match value.as_ref() {
                        "svg" => Format::Svg,
                        "png" => Format::Png,
                        _ => return Err(QrError::Format),
                    };
                }
                "size" => {
                    if std::mem::replace(&mut size_seen, true) {
                        return Err(QrError::Repeated("size"));
                    }
                    // Plain digits only: u32's parser would also take "+256".
                    if value.is_empty()
                        || value.len() > 4
                        || !value.bytes().all(|b| b.is_ascii_digit())
                    {
                        return Err(QrError::Size);
                    }
                    req.size = value.parse().map_err(|_| QrError::Size)?;
                    if !(MIN_SIZE..=MAX_SIZE).contains(&req.size) {
                        return Err(QrError::Size);
                    }
                }
                _ => {}
            }
        }
        Ok(req)
    }
}

/// A drawn code: its media type and bytes.
#[derive(Debug)]
pub struct Rendered {
    /// `image/svg+xml` or `image/png`.
    pub content_type: &'static str,
    /// The file.
    pub body: Vec<u8>,
}

/// Draws `text` as asked: whole pixels per module (blurred modules scan badly), as many as fit, the code centred
/// on a light square of exactly `size` pixels.
pub fn render(text: &str, req: QrRequest) -> Result<Rendered, QrError> {
    let code = QrCode::new(text.as_bytes()).map_err(|_| QrError::TooLong)?;
    let modules = u32::try_from(code.width()).map_err(|_| QrError::TooLong)? + 2 * QUIET_ZONE;
    let scale = req.size / modules;
    if scale == 0 {
        return Err(QrError::TooSmall(modules));
    }
    let offset = (req.size - scale * modules) / 2;
    match req.format {
        Format::Svg => {
            let drawn = code
                .render::<svg::Color<'_>>()
                .quiet_zone(false)
                .module_dimensions(scale, scale)
                .build();
            // The renderer's document is the code alone; frame it in the requested square with the quiet zone
            // and the centring margin as a light background.
            let inner = drawn
                .split_once("<svg")
                .and_then(|(_, rest)| rest.split_once('>'))
                .map(|(_, body)| body.trim_end_matches("</svg>").to_owned())
                .unwrap_or_default();
            let shift = offset + QUIET_ZONE * scale;
            let size = req.size;
            let body = format!(
                "<?xml version=\"1.0\" standalone=\"yes\"?><svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" \
                 width=\"{size}\" height=\"{size}\" viewBox=\"0 0 {size} {size}\" shape-rendering=\"crispEdges\">\
                 <rect width=\"{size}\" height=\"{size}\" fill=\"#fff\"/><g transform=\"translate({shift} {shift})\">\
                 {inner}</g></svg>"
            );
            Ok(Rendered {
                content_type: "image/svg+xml",
                body: body.into_bytes(),
            })
        }
        Format::Png => {
            let drawn = code
                .render::<Luma<u8>>()
                .quiet_zone(true)
                .module_dimensions(scale, scale)
                .build();
            let mut canvas = image::GrayImage::from_pixel(req.size, req.size, Luma([255]));
            image::imageops::replace(&mut canvas, &drawn, i64::from(offset), i64::from(offset));
            let mut body = Vec::new();
            image::codecs::png::PngEncoder::new(&mut body)
                .write_image(
                    canvas.as_raw(),
                    req.size,
                    req.size,
                    image::ExtendedColorType::L8,
                )
                .map_err(|_| QrError::TooLong)?;
            Ok(Rendered {
                content_type: "image/png",
                body,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "https://sho.rt/launch-2026";

    #[test]
    fn parses_format_and_size() {
        assert_eq!(QrRequest::parse(None), Ok(QrRequest::default()));
        assert_eq!(
            QrRequest::parse(Some("format=png&size=64&v=2")),
            Ok(QrRequest {
                format: Format::Png,
                size: 64
            })
        );
        assert_eq!(
            QrRequest::parse(Some("size=2048&format=svg")),
            Ok(QrRequest {
                format: Format::Svg,
                size: 2048
            })
        );
        for (query, err) in [
            ("format=jpeg", QrError::Format),
            ("format=", QrError::Format),
            ("format=PNG", QrError::Format),
            ("size=63", QrError::Size),
            ("size=2049", QrError::Size),
            ("size=", QrError::Size),
            ("size=%2B256", QrError::Size),
            ("size=256.0", QrError::Size),
            ("size=99999999999999999999", QrError::Size),
            ("size=-1", QrError::Size),
            ("size=64&size=128", QrError::Repeated("size")),
            ("format=png&format=png", QrError::Repeated("format")),
        ] {
            assert_eq!(QrRequest::parse(Some(query)), Err(err), "{query}");
        }
    }

    #[test]
    fn each_format_is_size_square_and_decodes() {
        type Decode = fn(&[u8]) -> Result<(u32, u32, String), String>;
        let png = (Format::Png, "image/png", decode::png as Decode);
        let svg = (Format::Svg, "image/svg+xml", decode::svg as Decode);
        for ((format, content_type, decode), sizes) in [
            (png, &[MIN_SIZE, 100, DEFAULT_SIZE, 777, MAX_SIZE][..]),
            (svg, &[MIN_SIZE, DEFAULT_SIZE, 1000][..]),
        ] {
            for &size in sizes {
                let out = render(URL, QrRequest { format, size }).unwrap();
                assert_eq!(out.content_type, content_type);
                assert_eq!(
                    decode(&out.body).unwrap(),
                    (size, size, URL.to_owned()),
                    "{format:?} {size}"
                );
            }
        }
    }

    #[test]
    fn a_code_larger_than_the_image_is_refused() {
        // A long custom-domain URL needs more than 64 modules with its quiet zone.
        let long = format!("https://{}.example/{}", "d".repeat(63), "c".repeat(150));
        let err = render(
            &long,
            QrRequest {
                format: Format::Png,
                size: MIN_SIZE,
            },
        )
        .unwrap_err();
        let QrError::TooSmall(need) = err else {
            panic!("{err:?}")
        };
        assert!(need > MIN_SIZE);
        let out = render(
            &long,
            QrRequest {
                format: Format::Png,
                size: need,
            },
        )
        .unwrap();
        assert_eq!(decode::png(&out.body).unwrap().2, long);
    }
}
