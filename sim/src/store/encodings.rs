//! The encodings of one live watch event, shared by every watch that sends it: each form (the
//! line type with the answer format) is encoded once, however many watches send the event. An
//! event's encodings go with it once every open watch has received it.

use bytes::Bytes;
use std::sync::Mutex;

/// Encodings of one event, by form: the line type and the answer format.
#[derive(Debug, Default)]
pub struct Encodings(Mutex<Vec<(&'static str, String, Bytes)>>);

impl Encodings {
    /// The encoding of the event as a `line_type` line in `format`, made by `encode` for the
    /// first watch that asks for it.
    pub fn get_or_encode(
        &self,
        line_type: &'static str,
        format: &str,
        encode: impl FnOnce() -> Bytes,
    ) -> Bytes {
        // the lock is held while encoding, so the watches asking at once wait for one encoding
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, bytes)) = known
            .iter()
            .find(|(t, f, _)| *t == line_type && f == format)
        {
            return bytes.clone();
        }
        let bytes = encode();
        known.push((line_type, format.to_string(), bytes.clone()));
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn each_form_is_encoded_once() {
        let encodings = Encodings::default();
        let calls = Cell::new(0);
        let encode = |text: &'static str| {
            || {
                calls.set(calls.get() + 1);
                Bytes::from_static(text.as_bytes())
            }
        };
        assert_eq!(encodings.get_or_encode("ADDED", "v1", encode("a")), "a");
        assert_eq!(encodings.get_or_encode("ADDED", "v1", encode("other")), "a");
        assert_eq!(encodings.get_or_encode("DELETED", "v1", encode("d")), "d");
        assert_eq!(encodings.get_or_encode("ADDED", "v2", encode("b")), "b");
        assert_eq!(calls.get(), 3);
    }
}
