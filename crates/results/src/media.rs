//! What the images and audio of a set of requests came to: sums a tally
//! keeps (and shards merge), and the per-request figures a point shows.
//! Absent from points without media, and from files written before them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Sums over the requests sent that carried images or audio.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MediaTotals {
    /// Requests that carried media.
    pub requests: u64,
    pub images: u64,
    /// Pixels of their synthetic images (URLs count none).
    pub image_pixels: u64,
    /// Bytes of their image files, before base64 (URLs count none).
    pub image_bytes: u64,
    pub audio_seconds: f64,
    /// Bytes of their audio files, before base64.
    pub audio_bytes: u64,
    /// Of those requests, the server-reported prompt tokens and how many
    /// reported them, and the prompt tokens asked for as text.
    #[serde(default)]
    pub reported_input_sum: u64,
    #[serde(default)]
    pub reported_input_n: u64,
    #[serde(default)]
    pub requested_input_sum: u64,
}

impl MediaTotals {
    pub fn merge(&mut self, o: &MediaTotals) {
        self.requests = self.requests.saturating_add(o.requests);
        self.images = self.images.saturating_add(o.images);
        self.image_pixels = self.image_pixels.saturating_add(o.image_pixels);
        self.image_bytes = self.image_bytes.saturating_add(o.image_bytes);
        self.audio_seconds += o.audio_seconds;
        self.audio_bytes = self.audio_bytes.saturating_add(o.audio_bytes);
        self.reported_input_sum = self.reported_input_sum.saturating_add(o.reported_input_sum);
        self.reported_input_n = self.reported_input_n.saturating_add(o.reported_input_n);
        self.requested_input_sum = self
            .requested_input_sum
            .saturating_add(o.requested_input_sum);
    }

    /// The per-request figures; `None` when no request carried media.
    pub fn stats(&self) -> Option<MediaStats> {
        if self.requests == 0 {
            return None;
        }
        let per = |x: f64| x / self.requests as f64;
        let images_per_request = per(self.images as f64);
        // What the server counted beyond the text asked for, per image:
        // only where it reported prompt tokens for every media request.
        let prompt_tokens_per_image = (self.images > 0 && self.reported_input_n == self.requests)
            .then(|| {
                (self.reported_input_sum as f64 - self.requested_input_sum as f64)
                    / self.images as f64
            });
        Some(MediaStats {
            requests: self.requests,
            images_per_request,
            image_pixels_per_request: per(self.image_pixels as f64),
            image_bytes_per_request: per(self.image_bytes as f64),
            image_bytes_total: self.image_bytes,
            audio_seconds_per_request: per(self.audio_seconds),
            audio_bytes_per_request: per(self.audio_bytes as f64),
            prompt_tokens_per_image,
        })
    }
}

/// The images and audio a point's requests carried, per request sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MediaStats {
    /// Requests that carried media.
    pub requests: u64,
    pub images_per_request: f64,
    pub image_pixels_per_request: f64,
    /// Image file bytes (before base64) per request, and in all.
    pub image_bytes_per_request: f64,
    pub image_bytes_total: u64,
    pub audio_seconds_per_request: f64,
    pub audio_bytes_per_request: f64,
    /// Prompt tokens the server counted beyond the text asked for, per
    /// image (the chat template's few tokens included): what an image
    /// cost on this server. Only where the server reported usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_per_image: Option<f64>,
}
