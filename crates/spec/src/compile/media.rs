//! A workload's `images` and `audio` tables: checked against the API (only
//! chat carries content parts) and the caps in [`crate::media`].

use super::{Cx, shown};
use crate::media::*;
use crate::raw::Api;

/// Most images of one request.
pub const MAX_IMAGES: u32 = 64;
/// Longest side of a synthetic image, in pixels.
pub const MAX_IMAGE_SIDE: u32 = 8192;
/// Longest synthetic audio clip, in seconds.
pub const MAX_AUDIO_SECONDS: f64 = 3600.0;
/// Most URLs an `images.urls` list may hold.
pub const MAX_IMAGE_URLS: usize = 10_000;
/// Longest URL of `images.urls`, in bytes.
pub const MAX_URL_BYTES: usize = 8192;

impl Cx<'_> {
    /// `workloads.NAME.images`.
    pub(super) fn images(&mut self, name: &str, api: Api, i: RawImages) -> Option<Images> {
        let before = self.errors.len();
        let k = |f: &str| format!("workloads.{name}.images{f}");
        if api != Api::Chat {
            self.key_err(
                &k(""),
                format!(
                    "images are sent as content parts of a chat message, so they need api = \"chat\" (this workload has api = \"{}\")",
                    api_name(api)
                ),
                Some("set api = \"chat\", or remove `images`".into()),
            );
        }
        self.count_in(
            &k(".count"),
            i.count.map(u64::from),
            1,
            MAX_IMAGES.into(),
            "a number of images per request",
        );
        let source = match i.urls {
            Some(urls) => {
                for (key, set) in [
                    ("width", i.width.is_some()),
                    ("height", i.height.is_some()),
                    ("format", i.format.is_some()),
                ] {
                    if set {
                        self.key_err(
                            &k(&format!(".{key}")),
                            format!("`{key}` describes synthetic images; with `urls` the images are the ones the URLs name"),
                            Some("remove it, or remove `urls` to send synthetic images".into()),
                        );
                    }
                }
                if urls.is_empty() || urls.len() > MAX_IMAGE_URLS {
                    self.err(
                        &k(".urls"),
                        format!(
                            "expected between 1 and {MAX_IMAGE_URLS} URLs, found {}",
                            urls.len()
                        ),
                        None,
                    );
                }
                for (n, u) in urls.iter().enumerate() {
                    let scheme_ok = ["http://", "https://", "data:image/"]
                        .iter()
                        .any(|s| u.get(..s.len()).is_some_and(|p| p.eq_ignore_ascii_case(s)));
                    if !scheme_ok || u.len() > MAX_URL_BYTES || u.chars().any(char::is_control) {
                        self.err(
                            &k(&format!(".urls[{n}]")),
                            format!(
                                "expected an http(s) URL or a data:image/ URL of at most {MAX_URL_BYTES} bytes without control characters, found \"{}\"",
                                shown(u)
                            ),
                            Some("the URL is sent to the server as it is; infer-bench never fetches it".into()),
                        );
                    }
                }
                ImageSource::Urls(urls)
            }
            None => {
                for (key, v) in [("width", i.width), ("height", i.height)] {
                    match v {
                        None => self.key_err(
                            &k(""),
                            format!("missing key `{key}`"),
                            Some("synthetic images need width and height, e.g. images = { count = 1, width = 1024, height = 1024 }; or give `urls`".into()),
                        ),
                        Some(x) => self.count_in(
                            &k(&format!(".{key}")),
                            Some(x.into()),
                            1,
                            MAX_IMAGE_SIDE.into(),
                            "a side in pixels",
                        ),
                    }
                }
                ImageSource::Synthetic {
                    width: i.width.unwrap_or(1),
                    height: i.height.unwrap_or(1),
                    format: i.format.unwrap_or_default(),
                }
            }
        };
        (self.errors.len() == before).then_some(Images {
            count: i.count.unwrap_or(1),
            source,
            detail: i.detail,
        })
    }

    /// `workloads.NAME.audio`.
    pub(super) fn audio(&mut self, name: &str, api: Api, a: RawAudio) -> Option<Audio> {
        let before = self.errors.len();
        let k = |f: &str| format!("workloads.{name}.audio{f}");
        if api != Api::Chat {
            self.key_err(
                &k(""),
                format!(
                    "audio is sent as an input_audio content part of a chat message, so it needs api = \"chat\" (this workload has api = \"{}\")",
                    api_name(api)
                ),
                Some("set api = \"chat\", or remove `audio`".into()),
            );
        }
        if !(a.seconds > 0.0 && a.seconds <= MAX_AUDIO_SECONDS) {
            self.err(
                &k(".seconds"),
                format!(
                    "expected a length in seconds in (0, {MAX_AUDIO_SECONDS}], found {}",
                    super::num(a.seconds)
                ),
                None,
            );
        }
        self.count_in(
            &k(".sample_rate"),
            a.sample_rate.map(u64::from),
            8_000,
            48_000,
            "a sample rate in Hz",
        );
        (self.errors.len() == before).then_some(Audio {
            seconds: a.seconds,
            format: a.format.unwrap_or_default(),
            sample_rate: a.sample_rate.unwrap_or(16_000),
        })
    }
}

fn api_name(api: Api) -> String {
    serde_json::to_value(api)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{api:?}").to_lowercase())
}
