//! Images on the wire, for every API shape: base64 data URLs (OpenAI's `image_url`,
//! Responses' `input_image`), base64 fields (Anthropic's `source.data`, Ollama's
//! `images`), into the runtime's [`ImageInput`]; the runtime decodes and checks them.
//! Remote URLs are refused here: `image_links` fetches them first where allowed.

use base64::Engine;
use llamay_runtime::ImageInput;

use crate::http::error::ApiError;

/// A message's images and where each sat among its parts: the byte length of the
/// text gathered before it (`ChatMessage::image_at`), so the template renders each
/// image where the client put it (llama.cpp's server writes its marker there).
#[derive(Default)]
pub(crate) struct Placed {
    pub(crate) images: Vec<ImageInput>,
    pub(crate) at: Vec<usize>,
}

impl Placed {
    /// `image` after the `text` gathered so far.
    pub(crate) fn push(&mut self, text: &str, image: ImageInput) {
        self.images.push(image);
        self.at.push(text.len());
    }
}

/// `url` as an image: a `data:…;base64,` URL. `field` names it in errors.
pub(crate) fn from_url(url: &str, field: &str) -> Result<ImageInput, ApiError> {
    if let Some(rest) = url.strip_prefix("data:") {
        let Some((meta, data)) = rest.split_once(',') else {
            return Err(ApiError::bad_request(format!(
                "{field}: a data URL needs a comma before its data"
            )));
        };
        if !meta.split(';').any(|p| p == "base64") {
            return Err(ApiError::bad_request(format!(
                "{field}: only base64 data URLs are read (data:image/png;base64,…)"
            )));
        }
        return from_base64(data, field);
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        // With `-allow-image-urls`, `image_links` has replaced every link by then.
        return Err(ApiError::bad_request(format!(
            "{field}: llamay does not fetch image URLs unless the server runs with \
             -allow-image-urls; send the image inline as a base64 data URL \
             (data:image/png;base64,…)"
        )));
    }
    Err(ApiError::bad_request(format!(
        "{field}: an image must be a base64 data URL (data:image/png;base64,…)"
    )))
}

/// Base64 text (the standard alphabet, padded or not, whitespace ignored) as an
/// image; a data URL is read as such too (Ollama clients send either), and a
/// link is refused as one.
pub(crate) fn from_base64(data: &str, field: &str) -> Result<ImageInput, ApiError> {
    if data.starts_with("data:") || data.starts_with("http://") || data.starts_with("https://") {
        return from_url(data, field);
    }
    let clean: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let bytes = engine.decode(clean.as_bytes()).map_err(|e| {
        ApiError::bad_request(format!("{field}: the image is not valid base64 ({e})"))
    })?;
    Ok(ImageInput(bytes.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_and_base64_are_read_and_the_rest_refused() {
        let im = from_url("data:image/png;base64,iVBORw0K", "f").unwrap();
        assert_eq!(&im.0[..4], b"\x89PNG");
        assert_eq!(from_base64("iVBO Rw0K\n", "f").unwrap(), im);
        assert_eq!(from_base64("iVBORw0", "f").unwrap().0.len(), 5);
        assert_eq!(
            from_base64("data:image/png;base64,iVBORw0K", "f").unwrap(),
            im
        );
        let msg = |r: Result<ImageInput, ApiError>| r.unwrap_err().message;
        assert!(msg(from_url("https://x.test/a.png", "f")).contains("-allow-image-urls"));
        assert!(msg(from_base64("http://x.test/a.png", "f")).contains("-allow-image-urls"));
        assert!(msg(from_url("data:image/png,abc", "f")).contains("base64"));
        assert!(msg(from_url("file:///etc/passwd", "f")).contains("data URL"));
        assert!(msg(from_base64("not base64 at all!", "f")).contains("not valid base64"));
    }
}
