//! Per-token cost on the host: full evaluation (decode + decrypt + parse + destination rules + expiry) and seal.
//!
//! `cargo bench -p shared-crypto --bench token`

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use shared_crypto::{DomainBlocklist, GroupKey, Payload, TokenCipher};

fn token(c: &mut Criterion) {
    let cipher = TokenCipher::new(&GroupKey::from_bytes([0x42; 32]));
    let payload = Payload {
        destination_url: "https://dest.example.org/landing/page?campaign=spring".into(),
        back_param: Some("utm_source=newsletter&utm_medium=email".into()),
        expires_at: Some(1_900_000_000),
    };
    let token = cipher.seal(&payload, [7; 12]);
    let blocklist: DomainBlocklist = (0..10_000)
        .map(|i| format!("blocked{i}.example.net"))
        .collect();
    let now = 1_800_000_000;

    c.bench_function("evaluate (decode+decrypt+validate, 10k blocklist)", |b| {
        b.iter(|| cipher.evaluate(black_box(&token), black_box(now), &blocklist))
    });
    c.bench_function("seal", |b| {
        b.iter(|| cipher.seal(black_box(&payload), black_box([7; 12])))
    });
    c.bench_function("TokenCipher::new (key schedule)", |b| {
        b.iter(|| TokenCipher::new(black_box(&GroupKey::from_bytes([0x42; 32]))))
    });
}

criterion_group!(benches, token);
criterion_main!(benches);
