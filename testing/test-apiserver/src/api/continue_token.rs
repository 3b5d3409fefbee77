//! `continue` tokens: the list's resourceVersion and the last key served,
//! opaque to clients.

use serde::{Deserialize, Serialize};

use crate::status::ApiError;
use crate::store::ObjectKey;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Wire {
    rv: u64,
    ns: String,
    name: String,
}

/// Where the next page of a list starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContinueToken {
    /// The resourceVersion every page is read at.
    pub(crate) rv: u64,
    /// The last key of the previous page.
    pub(crate) start_after: ObjectKey,
}

impl ContinueToken {
    pub(crate) fn encode(&self) -> String {
        let wire = Wire {
            rv: self.rv,
            ns: self.start_after.0.clone(),
            name: self.start_after.1.clone(),
        };
        let json = serde_json::to_vec(&wire).unwrap_or_default();
        json.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// # Errors
    ///
    /// 400 for a token this server did not issue.
    pub(crate) fn decode(token: &str) -> Result<Self, ApiError> {
        let invalid = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
        if !token.len().is_multiple_of(2) || !token.is_ascii() {
            return Err(invalid());
        }
        let bytes = (0..token.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&token[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| invalid())?;
        let wire: Wire = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        Ok(Self {
            rv: wire.rv,
            start_after: (wire.ns, wire.name),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_garbage_is_refused() {
        let token = ContinueToken {
            rv: 42,
            start_after: ("default".into(), "lb-7".into()),
        };
        assert_eq!(ContinueToken::decode(&token.encode()), Ok(token));
        assert_eq!(ContinueToken::decode("zz").map_err(|e| e.code), Err(400));
    }
}
