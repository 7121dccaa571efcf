//! Unit tests of `wire::batch`.

use super::*;

fn own(base: i64, count: i32) -> OwnBatch {
    OwnBatch {
        base_offset: base,
        count,
        timestamp: 1_700_000_000_000,
        producer_id: 7,
        producer_epoch: 0,
        base_sequence: 3,
    }
}

#[test]
fn own_batches_are_valid_and_recognisable() {
    let p = placeholder_batch(&own(10, 3), 0xfeed, 110);
    let mut it = BatchIter::new(p.clone());
    let b = it.next().unwrap().unwrap();
    assert!(it.next().is_none() && it.truncated_at().is_none());
    assert_eq!((b.base_offset(), b.last_offset(), b.record_count()), (10, 12, 3));
    assert!(b.crc_is_valid() && b.is_placeholder() && !b.is_control());
    assert_eq!((b.producer_id(), b.base_sequence()), (7, 3));

    let c = Batch { bytes: control_batch(&own(10, 3)) };
    assert!(c.crc_is_valid() && c.is_control() && c.is_transactional() && !c.is_placeholder());
    assert_eq!((c.base_offset(), c.next_offset(), c.record_count()), (10, 13, 1));
}

/// The per-partition check the proxy runs on every Fetch response: found after other
/// batches, not found in data, control, compressed or transactional batches (even with a
/// placeholder-like key), and no panic on cut or corrupt bytes.
#[test]
fn has_placeholder_walks_headers_and_checks_the_first_key() {
    let p = placeholder_batch(&own(10, 3), 0xfeed, 110);
    let c = control_batch(&own(0, 10));
    let both = [c.as_ref(), p.as_ref()].concat();
    assert!(has_placeholder(&both) && has_placeholder(&p));
    assert!(!has_placeholder(&c) && !has_placeholder(&[]));
    // The same bytes with the compression, transactional or control bit set (CRC not
    // checked here): not a placeholder, the key is not even looked at.
    for bit in [1i16, ATTR_TRANSACTIONAL, ATTR_CONTROL] {
        let mut v = p.to_vec();
        v[21..23].copy_from_slice(&bit.to_be_bytes());
        assert!(!has_placeholder(&v), "attributes {bit:#x}");
    }
    // A first key that differs in its last magic byte, or is shorter than the magic.
    let mut v = p.to_vec();
    let at = v.windows(8).position(|w| w == PLACEHOLDER_MAGIC).unwrap();
    v[at + 7] ^= 1;
    assert!(!has_placeholder(&v));
    // A partial batch at the end (the broker cuts at max_bytes) and garbage never panic.
    assert!(!has_placeholder(&p[..p.len() - 1]));
    assert!(!has_placeholder(&both[..both.len() - 5]), "placeholder cut short");
    for cut in 0..both.len() {
        let _ = has_placeholder(&both[..cut]);
        let mut g = both.clone();
        g[cut] = 0xff;
        let _ = has_placeholder(&g);
    }
}

/// A batch's first bytes clear it exactly when they prove it is no placeholder: never a
/// placeholder or a batch whose first key starts like one, an uncompressed batch of a
/// producer id only once its first key is in, other batches by their header, and always
/// within [`CLEAR_PREFIX_BYTES`].
#[test]
fn a_batch_is_cleared_by_its_first_bytes_only_when_they_prove_it() {
    let p = placeholder_batch(&own(10, 3), 0xfeed, 110).to_vec();
    let key_at = p.windows(8).position(|w| w == PLACEHOLDER_MAGIC).unwrap();
    let with = |at: std::ops::Range<usize>, bytes: &[u8]| {
        let mut v = p.clone();
        v[at].copy_from_slice(bytes);
        v
    };
    let mut near = p.clone();
    near[key_at + 7] ^= 1;
    let cases: Vec<(&str, Vec<u8>, Option<usize>)> = vec![
        ("placeholder", p.clone(), None),
        ("first key one byte off the magic", near.clone(), Some(key_at + 8)),
        ("compressed", with(21..23, &1i16.to_be_bytes()), Some(HEADER_LEN)),
        ("transactional", with(21..23, &ATTR_TRANSACTIONAL.to_be_bytes()), Some(HEADER_LEN)),
        ("no producer id", with(43..51, &(-1i64).to_be_bytes()), Some(HEADER_LEN)),
        ("magic-key data, not a placeholder", with(23..27, &7i32.to_be_bytes()), None),
        ("message format 1", with(16..17, &[1]), None),
    ];
    for (name, b, cleared_from) in cases {
        for cut in 0..=b.len() {
            let want = cleared_from.filter(|from| cut >= *from).map(|_| b.len());
            assert_eq!(cleared_by_prefix(&b[..cut]), want, "{name}, first {cut} bytes");
        }
        if let Some(from) = cleared_from {
            assert!(from <= CLEAR_PREFIX_BYTES && !is_placeholder_batch(&b), "{name}");
        }
    }
    assert!(is_placeholder_batch(&p));
}

fn ph_key(nonce: u64, offset: i64) -> [u8; PLACEHOLDER_KEY_LEN] {
    let mut key = [0u8; PLACEHOLDER_KEY_LEN];
    key[..8].copy_from_slice(PLACEHOLDER_MAGIC);
    key[8..16].copy_from_slice(&nonce.to_be_bytes());
    key[16..24].copy_from_slice(&offset.to_be_bytes());
    key
}

/// A record to write: offset delta, key, value.
type Rec<'a> = (i32, Vec<u8>, Option<&'a [u8]>);

/// A batch of `records` as an uncompressed producer writes it.
fn batch_of(records: &[Rec<'_>], last_offset_delta: i32) -> Vec<u8> {
    let mut out = BytesMut::new();
    put_header(&mut out, &own(0, last_offset_delta + 1), 0, last_offset_delta, records.len() as i32);
    for (delta, key, value) in records {
        put_record(&mut out, *delta, key, *value);
    }
    finish(&mut out, 0);
    out.to_vec()
}

/// Issue 12 review: a placeholder is recognised by all its records, not by the first key.
/// A batch a client forwarded with a placeholder first and real records after it (which
/// the proxy would turn into a COMMIT control batch, losing the real records) is not one.
#[test]
fn only_whole_placeholder_batches_are_recognised() {
    let p = placeholder_batch(&own(10, 3), 0xfeed, 110);
    assert!(is_placeholder_batch(&p));
    let ph = |i: i64| ph_key(0xfeed, 110 + i).to_vec();
    // The same records written by hand are recognised (the check is the layout, not ours).
    assert!(is_placeholder_batch(&batch_of(&[(0, ph(0), None), (1, ph(1), None), (2, ph(2), None)], 2)));
    // Placeholder first, a real record after it.
    let mixed = batch_of(&[(0, ph(0), None), (1, b"order-17".to_vec(), Some(b"paid"))], 1);
    assert!(!is_placeholder_batch(&mixed) && !has_placeholder(&mixed));
    // Placeholder first, a real record with a placeholder-like key but a value.
    assert!(!is_placeholder_batch(&batch_of(&[(0, ph(0), None), (1, ph(1), Some(b"v"))], 1)));
    // Another nonce, a wrong or repeated source offset, a gap in the offset deltas.
    assert!(!is_placeholder_batch(&batch_of(&[(0, ph(0), None), (1, ph_key(0xbeef, 111).to_vec(), None)], 1)));
    assert!(!is_placeholder_batch(&batch_of(&[(0, ph(0), None), (1, ph(0), None)], 1)));
    assert!(!is_placeholder_batch(&batch_of(&[(0, ph(0), None), (1, ph(2), None)], 1)));
    // Compaction-like removal (the middle record gone, lastOffsetDelta kept): record count
    // and offset deltas no longer match, so it is not taken for a placeholder batch.
    assert!(!is_placeholder_batch(&batch_of(&[(0, ph(0), None), (2, ph(2), None)], 2)));
    // A single placeholder record with more offsets announced than records.
    assert!(!is_placeholder_batch(&batch_of(&[(0, ph(0), None)], 1)));
    // An ordinary keyed uncompressed batch, and a record with headers or attributes.
    assert!(!is_placeholder_batch(&batch_of(&[(0, b"k".to_vec(), Some(b"v")), (1, b"k2".to_vec(), None)], 1)));
    let mut v = p.to_vec();
    let last_headers = v.len() - 1;
    v[last_headers] = 2; // headers count 1 (zigzag), without the header bytes
    assert!(!is_placeholder_batch(&v));
    // A producer id below 0 (not an idempotent mirror batch).
    let mut v = p.to_vec();
    v[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    assert!(!is_placeholder_batch(&v));
    // Trailing bytes after the last record.
    let mut v = p.to_vec();
    v.push(0);
    assert!(!is_placeholder_batch(&v));
    // Never panics on cut or corrupted bytes.
    for cut in 0..p.len() {
        assert!(!is_placeholder_batch(&p[..cut]));
        for byte in [0x00, 0x7f, 0x80, 0xff] {
            let mut g = p.to_vec();
            g[cut] = byte;
            let _ = is_placeholder_batch(&g);
        }
    }
}

#[test]
fn offsets_near_the_top_of_the_range_saturate_instead_of_overflowing() {
    let mut bytes = control_batch(&own(0, 4)).to_vec();
    bytes[..8].copy_from_slice(&(i64::MAX - 1).to_be_bytes());
    let b = Batch { bytes: Bytes::from(bytes) };
    assert_eq!((b.last_offset(), b.next_offset()), (i64::MAX, i64::MAX));
}

#[test]
fn kafka_protocol_decodes_our_batches() {
    let mut p = placeholder_batch(&own(0, 2), 1, 0);
    let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut p).unwrap();
    assert_eq!(set.records.len(), 2);
    assert_eq!(set.records[1].offset, 1);
    assert!(set.records[0].value.is_none());
    assert_eq!(&set.records[1].key.as_ref().unwrap()[..8], PLACEHOLDER_MAGIC);
    let mut c = control_batch(&own(5, 4));
    let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut c).unwrap();
    assert!(set.records[0].control);
}

#[test]
fn patch_keeps_payload_and_recomputes_crc() {
    let p = placeholder_batch(&own(0, 5), 9, 0);
    let b = Batch { bytes: p };
    let h = patch_header(
        &b,
        &HeaderPatch {
            producer_id: Some(42),
            producer_epoch: Some(3),
            base_sequence: Some(1000),
            clear_transactional: true,
            ..Default::default()
        },
    );
    let mut whole = BytesMut::from(&h[..]);
    whole.extend_from_slice(&b.payload());
    let patched = Batch { bytes: whole.freeze() };
    assert!(patched.crc_is_valid());
    assert_eq!((patched.producer_id(), patched.producer_epoch(), patched.base_sequence()), (42, 3, 1000));
    assert_eq!(patched.payload(), b.payload());
    assert_ne!(patched.crc(), b.crc());
}

#[test]
fn partial_and_bad_batches() {
    let a = placeholder_batch(&own(0, 2), 1, 0);
    let b = placeholder_batch(&own(2, 2), 1, 2);
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&a);
    buf.extend_from_slice(&b[..b.len() - 5]);
    let mut it = BatchIter::new(buf.freeze());
    assert_eq!(it.next().unwrap().unwrap().base_offset(), 0);
    assert!(it.next().is_none());
    assert_eq!(it.truncated_at(), Some(a.len()));

    let mut bad = BytesMut::from(&a[..]);
    bad[16] = 1;
    assert!(matches!(BatchIter::new(bad.freeze()).next(), Some(Err(BatchError::UnsupportedMagic { .. }))));
    let mut bad = BytesMut::from(&a[..]);
    bad[8..12].copy_from_slice(&3i32.to_be_bytes());
    assert!(matches!(BatchIter::new(bad.freeze()).next(), Some(Err(BatchError::BadLength { .. }))));
    for cut in 0..a.len() {
        let _ = BatchIter::new(a.slice(..cut)).count();
    }
}
