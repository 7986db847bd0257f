//! Images and audio in chat requests (vision and audio models): the raw
//! `images` and `audio` tables of a workload as they are written, and what
//! they compile to. Each request carries them as OpenAI content parts in
//! its last user message; `infer-bench-workload` makes the bytes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pixel format of synthetic images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// Lossless, 8-bit RGB (larger: a photograph-like image is about 1.5 to
    /// 2.5 bytes a pixel).
    #[default]
    Png,
    /// Baseline JPEG, quality 85, 4:2:0.
    Jpeg,
}

impl ImageFormat {
    /// The format's name in a data URL's media type (`image/png`).
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpeg",
        }
    }
}

/// OpenAI's `image_url.detail`: how finely the server looks at the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImageDetail {
    Auto,
    Low,
    High,
}

impl ImageDetail {
    pub fn name(self) -> &'static str {
        match self {
            ImageDetail::Auto => "auto",
            ImageDetail::Low => "low",
            ImageDetail::High => "high",
        }
    }
}

/// The format of synthetic audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum AudioFormat {
    /// RIFF WAVE, 16-bit signed PCM, mono.
    #[default]
    Wav,
}

impl AudioFormat {
    pub fn name(self) -> &'static str {
        "wav"
    }
}

/// `images = { ... }`: images sent with every request of a chat workload,
/// either synthesized (`width`, `height`, `format`) or the URLs given
/// (`urls`, sent as they are: never fetched by infer-bench).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawImages {
    /// Images per request. Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub count: Option<u32>,
    /// Width of each synthetic image in pixels.
    #[serde(default)]
    pub width: Option<u32>,
    /// Height of each synthetic image in pixels.
    #[serde(default)]
    pub height: Option<u32>,
    /// png (default) or jpeg.
    #[serde(default)]
    pub format: Option<ImageFormat>,
    /// `image_url.detail`: auto, low or high; left out of the request when not set.
    #[serde(default)]
    pub detail: Option<ImageDetail>,
    /// Image URLs sent as they are, in turn, instead of synthetic images.
    #[serde(default)]
    pub urls: Option<Vec<String>>,
}

/// `audio = { ... }`: an audio clip sent with every request of a chat
/// workload (`input_audio`).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAudio {
    /// Length of each clip in seconds.
    pub seconds: f64,
    /// wav (the default and only one).
    #[serde(default)]
    pub format: Option<AudioFormat>,
    /// Samples per second. Default 16000 (what speech models take).
    #[serde(default)]
    pub sample_rate: Option<u32>,
}

/// Where a workload's images come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImageSource {
    /// Made from the seed: `width` x `height` pixels in `format`.
    Synthetic {
        width: u32,
        height: u32,
        format: ImageFormat,
    },
    /// The URLs given, in turn.
    Urls(Vec<String>),
}

/// The images of every request of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Images {
    pub count: u32,
    pub source: ImageSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<ImageDetail>,
}

/// The audio clip of every request of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Audio {
    pub seconds: f64,
    pub format: AudioFormat,
    pub sample_rate: u32,
}
