//! The KIP-1279 mirror admin RPC bodies (src/wire/mirror/*): requests come from clients on
//! an admin listener, responses from mirrorgate to the `mirrors` CLI.
//!
//! Input: byte 0 picks the RPC (`% 8`, `MirrorApi::ALL` order) and bit 3 picks response
//! (set) or request (clear); byte 1 is the low byte of the version (0 is the only valid
//! one); the rest is the body (after the request/response header).
//! Invariant beyond "no panic": whatever decodes encodes, and decodes again to the same value.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use mirrorgate::wire::mirror::{self as mwire, MirrorApi};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let api = MirrorApi::ALL[usize::from(data[0] % 8)];
    let response = data[0] & 0x08 != 0;
    let version = i16::from(data[1] as i8);
    let mut body = Bytes::copy_from_slice(&data[2..]);
    if response {
        if let Ok(resp) = mwire::decode_response(api, version, &mut body) {
            assert_eq!(resp.api(), api);
            let _ = resp.error_code();
            let mut out = BytesMut::new();
            mwire::encode_response(&resp, version, &mut out).expect("a decoded response encodes");
            let again = mwire::decode_response(api, version, &mut out.freeze()).expect("re-decodes");
            assert_eq!(again, resp);
        }
    } else if let Ok(req) = mwire::decode_request(api, version, &mut body) {
        assert_eq!(req.api(), api);
        let mut out = BytesMut::new();
        mwire::encode_request(&req, version, &mut out).expect("a decoded request encodes");
        let again = mwire::decode_request(api, version, &mut out.freeze()).expect("re-decodes");
        assert_eq!(again, req);
    }
});
