//! Real picture files for tests of inputs that read pictures: PNGs and
//! JPEGs from the same encoders users' files come from, of one colour, so
//! that what a server receives after decoding and scaling is known.

/// A PNG of `w` x `h` pixels, all `rgb`.
pub fn solid_png(w: u32, h: u32, rgb: [u8; 3]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, w, h);
    e.set_color(png::ColorType::Rgb);
    e.set_depth(png::BitDepth::Eight);
    let mut writer = e.write_header().expect("a PNG header");
    let pixels: Vec<u8> = (0..w * h).flat_map(|_| rgb).collect();
    writer.write_image_data(&pixels).expect("PNG data");
    writer.finish().expect("a whole PNG");
    out
}

/// A JPEG (quality 95) of `w` x `h` pixels, all `rgb` (give or take
/// the format's rounding).
pub fn solid_jpeg(w: u16, h: u16, rgb: [u8; 3]) -> Vec<u8> {
    let mut out = Vec::new();
    let pixels: Vec<u8> = (0..usize::from(w) * usize::from(h))
        .flat_map(|_| rgb)
        .collect();
    jpeg_encoder::Encoder::new(&mut out, 95)
        .encode(&pixels, w, h, jpeg_encoder::ColorType::Rgb)
        .expect("a JPEG");
    out
}
