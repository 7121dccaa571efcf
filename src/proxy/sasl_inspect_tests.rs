//! Every transition of [`SaslInspector`], with the attacks of issue 32 among them.

use super::*;

const OK: i16 = 0;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;

fn now() -> Instant {
    Instant::now()
}

/// Handshake and its answer, then one SaslAuthenticate per message, each answered `error`.
fn exchange(s: &mut SaslInspector, first_id: i32, mechanism: &str, messages: &[&[u8]], lifetime_ms: i64) -> Answered {
    s.on_handshake(first_id, 1, mechanism).unwrap();
    assert_eq!(s.on_handshake_answer(first_id, OK), Answered::Continue);
    let mut last = Answered::Continue;
    for (i, m) in messages.iter().enumerate() {
        let id = first_id + 1 + i as i32;
        s.on_authenticate(id, m).unwrap();
        last = s.on_authenticate_answer(id, OK, false, lifetime_ms, now());
    }
    last
}

fn principal(s: &SaslInspector) -> Option<String> {
    s.session().and_then(|x| x.principal.clone())
}

fn kind(r: Result<(), Violation>) -> &'static str {
    r.unwrap_err().kind
}

#[test]
fn plain_binds_the_user_of_the_accepted_exchange() {
    let mut s = SaslInspector::default();
    assert_eq!(exchange(&mut s, 1, "PLAIN", &[b"\0eve\0pw"], 0), Answered::Ended { ok: true, reauth: false });
    assert_eq!(principal(&s).as_deref(), Some("User:eve"));
    assert_eq!(s.session().unwrap().mechanism, Mechanism::Plain);
}

/// The reproduced attack: eve's exchange and a second one for admin in one write. The second
/// SaslHandshake arrives while eve's SaslAuthenticate is unanswered.
#[test]
fn a_pipelined_second_exchange_is_refused() {
    let mut s = SaslInspector::default();
    s.on_handshake(1, 1, "PLAIN").unwrap();
    assert_eq!(kind(s.on_authenticate(2, b"\0eve\0pw")), "pipelined", "SaslAuthenticate before the handshake answer");
    let mut s = SaslInspector::default();
    s.on_handshake(1, 1, "PLAIN").unwrap();
    s.on_handshake_answer(1, OK);
    s.on_authenticate(2, b"\0eve\0pw").unwrap();
    let v = s.on_handshake(3, 1, "PLAIN").unwrap_err();
    assert_eq!(v.kind, "pipelined");
    assert!(v.reason.contains("correlation id 2"), "{}", v.reason);
    assert_eq!(principal(&s), None);
}

/// The SCRAM variant: eve's client-final pipelined with a PLAIN exchange for admin.
#[test]
fn the_scram_variant_is_refused_and_scram_needs_both_rounds() {
    let mut s = SaslInspector::default();
    s.on_handshake(1, 1, "SCRAM-SHA-512").unwrap();
    s.on_handshake_answer(1, OK);
    s.on_authenticate(2, b"n,,n=eve,r=abc").unwrap();
    assert_eq!(s.on_authenticate_answer(2, OK, true, 0, now()), Answered::Continue);
    assert_eq!(principal(&s), None, "one SCRAM round of two");
    s.on_authenticate(3, b"c=biws,r=abcdef,p=proof").unwrap();
    assert_eq!(kind(s.on_handshake(4, 1, "PLAIN")), "pipelined");
    // Not pipelined: eve completes, then the second exchange is out of sequence (the broker
    // gave no session lifetime, so no re-authentication is possible).
    assert_eq!(s.on_authenticate_answer(3, OK, true, 0, now()), Answered::Ended { ok: true, reauth: false });
    assert_eq!(principal(&s).as_deref(), Some("User:eve"));
    let v = s.on_handshake(4, 1, "PLAIN").unwrap_err();
    assert_eq!((v.kind, v.reauthenticating), ("out_of_sequence", true));
    assert_eq!(kind(s.on_authenticate(5, b"\0admin\0x")), "out_of_sequence");
}

#[test]
fn a_refused_first_exchange_leaves_no_principal_and_may_be_tried_again() {
    let mut s = SaslInspector::default();
    s.on_handshake(1, 1, "PLAIN").unwrap();
    s.on_handshake_answer(1, OK);
    s.on_authenticate(2, b"\0admin\0wrong").unwrap();
    assert_eq!(
        s.on_authenticate_answer(2, SASL_AUTHENTICATION_FAILED, false, 0, now()),
        Answered::Ended { ok: false, reauth: false }
    );
    assert_eq!(principal(&s), None);
    s.on_handshake(3, 1, "NOPE").unwrap();
    assert_eq!(s.on_handshake_answer(3, UNSUPPORTED_SASL_MECHANISM), Answered::Ended { ok: false, reauth: false });
    assert_eq!(kind(s.on_authenticate(4, b"\0eve\0pw")), "out_of_sequence", "no accepted handshake");
    assert_eq!(exchange(&mut s, 5, "PLAIN", &[b"\0eve\0pw"], 0), Answered::Ended { ok: true, reauth: false });
    assert_eq!(principal(&s).as_deref(), Some("User:eve"));
}

#[test]
fn requests_out_of_sequence_close() {
    let mut s = SaslInspector::default();
    assert_eq!(kind(s.on_authenticate(1, b"\0eve\0pw")), "out_of_sequence", "no handshake");
    s.on_handshake(2, 1, "SCRAM-SHA-256").unwrap();
    s.on_handshake_answer(2, OK);
    assert_eq!(kind(s.on_handshake(3, 1, "PLAIN")), "out_of_sequence", "handshake during an exchange");
    let mut s = SaslInspector::default();
    assert_eq!(kind(s.on_handshake(1, 0, "PLAIN")), "handshake_v0");
}

#[test]
fn answers_must_pair_with_the_request() {
    let mut s = SaslInspector::default();
    assert!(matches!(
        s.on_handshake_answer(1, OK),
        Answered::Close { violation: Violation { kind: "unpaired", .. }, .. }
    ));
    s.on_handshake(1, 1, "PLAIN").unwrap();
    assert!(matches!(s.on_authenticate_answer(1, OK, false, 0, now()), Answered::Close { forward: false, .. }));
    let mut s = SaslInspector::default();
    s.on_handshake(1, 1, "PLAIN").unwrap();
    assert!(matches!(s.on_handshake_answer(9, OK), Answered::Close { .. }), "another correlation id");
}

#[test]
fn reauthentication_keeps_principal_and_mechanism() {
    let mut s = SaslInspector::default();
    exchange(&mut s, 1, "SCRAM-SHA-512", &[b"n,,n=frank,r=a", b"c=biws,r=ab,p=x"], 5000);
    let first = s.session().unwrap().expires_at.unwrap();
    // Same user: accepted, the session's end moves on.
    assert_eq!(
        exchange(&mut s, 10, "SCRAM-SHA-512", &[b"n,,n=frank,r=a", b"c=biws,r=ab,p=x"], 5000),
        Answered::Ended { ok: true, reauth: true }
    );
    assert_eq!(principal(&s).as_deref(), Some("User:frank"));
    assert!(s.session().unwrap().expires_at.unwrap() >= first);
    // While one runs, the principal is still frank's.
    s.on_handshake(20, 1, "SCRAM-SHA-512").unwrap();
    s.on_handshake_answer(20, OK);
    s.on_authenticate(21, b"n,,n=admin,r=a").unwrap();
    s.on_authenticate_answer(21, OK, true, 0, now());
    assert_eq!(principal(&s).as_deref(), Some("User:frank"));
    // An accepted one naming someone else: our reading differs from the broker's.
    s.on_authenticate(22, b"c=biws,r=ab,p=x").unwrap();
    let a = s.on_authenticate_answer(22, OK, true, 5000, now());
    assert!(
        matches!(&a, Answered::Close { violation: Violation { kind: "principal_changed", .. }, forward: false }),
        "{a:?}"
    );
    // Another mechanism is refused before it reaches the broker.
    let mut s = SaslInspector::default();
    exchange(&mut s, 1, "SCRAM-SHA-512", &[b"n,,n=frank,r=a", b"c=biws,r=ab,p=x"], 5000);
    assert_eq!(kind(s.on_handshake(5, 1, "PLAIN")), "mechanism_changed");
}

#[test]
fn a_refused_reauthentication_closes_after_the_answer() {
    let mut s = SaslInspector::default();
    exchange(&mut s, 1, "PLAIN", &[b"\0eve\0pw"], 5000);
    s.on_handshake(3, 1, "PLAIN").unwrap();
    s.on_handshake_answer(3, OK);
    s.on_authenticate(4, b"\0eve\0old").unwrap();
    let a = s.on_authenticate_answer(4, SASL_AUTHENTICATION_FAILED, false, 0, now());
    assert!(
        matches!(
            &a,
            Answered::Close { violation: Violation { kind: "refused_after_authentication", .. }, forward: true }
        ),
        "{a:?}"
    );
    // A handshake the authenticated broker answers with an error (within 1 s of the last
    // re-authentication, Kafka answers ILLEGAL_SASL_STATE) closes too.
    let mut s = SaslInspector::default();
    exchange(&mut s, 1, "PLAIN", &[b"\0eve\0pw"], 5000);
    s.on_handshake(3, 1, "PLAIN").unwrap();
    assert!(matches!(s.on_handshake_answer(3, ILLEGAL_SASL_STATE), Answered::Close { forward: true, .. }));
}

/// The broker takes a re-authentication begun after the session ended (its `SocketServer`
/// checks a SaslHandshake before the expiry, docs/broker-behaviour.md pin 13); so does
/// mirrorgate, and the session lives on.
#[test]
fn an_expired_session_may_still_reauthenticate() {
    let mut s = SaslInspector::default();
    s.on_handshake(1, 1, "PLAIN").unwrap();
    s.on_handshake_answer(1, OK);
    s.on_authenticate(2, b"\0eve\0pw").unwrap();
    let long_ago = now().checked_sub(Duration::from_secs(10)).unwrap_or_else(now);
    s.on_authenticate_answer(2, OK, false, 1000, long_ago);
    assert!(s.expired(now()));
    assert_eq!(exchange(&mut s, 3, "PLAIN", &[b"\0eve\0pw"], 1000), Answered::Ended { ok: true, reauth: true });
    assert!(!s.expired(now()));
    assert_eq!(principal(&s).as_deref(), Some("User:eve"));
}

/// A token the broker refuses is answered with error 0 and a JSON error challenge; its `sub`
/// must not become the principal.
#[test]
fn an_oauthbearer_error_challenge_does_not_authenticate() {
    use base64::Engine as _;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"sub":"admin"}"#);
    let first = format!("n,,\u{1}auth=Bearer eyJhbGciOiJub25lIn0.{payload}.forged\u{1}\u{1}");
    let mut s = SaslInspector::default();
    s.on_handshake(1, 1, "OAUTHBEARER").unwrap();
    s.on_handshake_answer(1, OK);
    s.on_authenticate(2, first.as_bytes()).unwrap();
    assert_eq!(s.on_authenticate_answer(2, OK, true, 0, now()), Answered::Continue, "error challenge");
    assert_eq!(principal(&s), None);
    s.on_authenticate(3, b"\x01").unwrap();
    assert_eq!(
        s.on_authenticate_answer(3, SASL_AUTHENTICATION_FAILED, false, 0, now()),
        Answered::Ended { ok: false, reauth: false }
    );
    assert_eq!(principal(&s), None);
    // The same token accepted (empty server answer) is trusted.
    assert_eq!(exchange(&mut s, 4, "OAUTHBEARER", &[first.as_bytes()], 0), Answered::Ended { ok: true, reauth: false });
    assert_eq!(principal(&s).as_deref(), Some("User:admin"));
}

#[test]
fn an_oauthbearer_key_named_twice_is_refused() {
    let mut s = SaslInspector::default();
    s.on_handshake(1, 1, "OAUTHBEARER").unwrap();
    s.on_handshake_answer(1, OK);
    let v = s.on_authenticate(2, b"n,,\x01auth=Bearer a.b.c\x01auth=Bearer d.e.f\x01\x01").unwrap_err();
    assert_eq!(v.kind, "duplicate_key");
}

#[test]
fn an_accepted_exchange_mirrorgate_cannot_read_has_no_principal() {
    let mut s = SaslInspector::default();
    exchange(&mut s, 1, "SCRAM-SHA-256", &[b"n,,n=tokenid,r=a,tokenauth=true", b"c=biws,r=ab,p=x"], 0);
    assert!(s.session().is_some(), "authenticated");
    assert_eq!(principal(&s), None, "a delegation token's owner is not in the message");
}

#[test]
fn other_mechanisms_pass_one_request_at_a_time_without_a_principal() {
    let mut s = SaslInspector::default();
    s.on_handshake(1, 1, "GSSAPI").unwrap();
    assert_eq!(s.on_handshake_answer(1, OK), Answered::Continue);
    assert!(s.opaque());
    for id in 2..6 {
        s.on_authenticate(id, b"token").unwrap();
        assert_eq!(s.on_authenticate_answer(id, OK, true, 0, now()), Answered::Continue);
    }
    s.on_authenticate(6, b"token").unwrap();
    assert_eq!(kind(s.on_authenticate(7, b"token")), "pipelined");
    assert!(s.session().is_none());
    // A later exchange with a mechanism mirrorgate reads still names nobody.
    s.on_authenticate_answer(6, OK, false, 0, now());
    s.on_handshake(8, 1, "PLAIN").unwrap();
    s.on_handshake_answer(8, OK);
    s.on_authenticate(9, b"\0admin\0pw").unwrap();
    s.on_authenticate_answer(9, OK, false, 0, now());
    assert!(s.session().is_none());
}

/// An OAUTHBEARER token that expired before its exchange ended: the broker accepts it (within
/// `sasl.oauthbearer.clock.skew.seconds`) with session lifetime 0 and closes the connection at
/// its next request; before the adversarial review of issue 32 mirrorgate took lifetime 0 for
/// "no limit" and kept the principal for good.
#[test]
fn an_oauthbearer_session_of_lifetime_zero_is_already_over() {
    use base64::Engine as _;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"sub":"admin"}"#);
    let msg = format!("n,,\u{1}auth=Bearer eyJhbGciOiJub25lIn0.{payload}.sig\u{1}\u{1}");
    let mut s = SaslInspector::default();
    assert_eq!(exchange(&mut s, 1, "OAUTHBEARER", &[msg.as_bytes()], 0), Answered::Ended { ok: true, reauth: false });
    assert_eq!(principal(&s).as_deref(), Some("User:admin"));
    assert!(s.expired(now()), "lifetime 0 for a token is an ended session");
    // PLAIN and SCRAM credentials have no expiry: lifetime 0 there means no limit.
    let mut s = SaslInspector::default();
    exchange(&mut s, 1, "PLAIN", &[b"\0eve\0pw"], 0);
    assert!(!s.expired(now()));
    // A token with a lifetime lives for it.
    let mut s = SaslInspector::default();
    exchange(&mut s, 1, "OAUTHBEARER", &[msg.as_bytes()], 60_000);
    assert!(!s.expired(now()));
}

/// A SaslAuthenticate v0 answer has no `session_lifetime_ms`, though the broker may end the
/// session (KIP-368): such a session names no principal at mirrorgate.
#[test]
fn a_v0_session_names_no_principal() {
    let mut s = SaslInspector::default();
    assert_eq!(exchange(&mut s, 1, "PLAIN", &[b"\0admin\0pw"], -1), Answered::Ended { ok: true, reauth: false });
    let session = s.session().expect("the broker accepted it");
    assert_eq!((session.principal.as_deref(), session.why_unnamed), (None, Some(V0_UNNAMED)));
    assert!(!s.expired(now()));
    assert_eq!(session.lifetime_ms, 0);
    assert_eq!(s.on_handshake(9, 1, "PLAIN").unwrap_err().kind, "out_of_sequence", "no re-authentication");
}
