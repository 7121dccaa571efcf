//! SASL inspection of one client connection (issue 32 item 1): the principal the destination
//! broker authenticated the client as, taken only from the broker's answers, in order.
//!
//! mirrorgate forwards a client's SaslHandshake (17) and SaslAuthenticate (36) requests to the
//! destination broker and authenticates no one itself; it needs the principal only for what it
//! answers itself (the mirror RPCs and mirror configs, [`super::authz`]). The rules follow Kafka's
//! `SaslServerAuthenticator`, `KafkaChannel.maybeBeginServerReauthentication` (KIP-368) and
//! `KafkaApis.handleSaslHandshakeRequest/handleSaslAuthenticateRequest`, as Kroxylicious's SASL
//! inspection does:
//!
//! - **One SASL request at a time.** A SaslHandshake or SaslAuthenticate sent while the broker
//!   has not answered the previous one closes the connection: a request's claim is only ever
//!   paired with its own answer (by correlation id).
//! - **In sequence.** A SaslHandshake starts an exchange before authentication, or after it as
//!   a KIP-368 re-authentication: the broker gave the session a lifetime (a positive
//!   `session_lifetime_ms`) and the mechanism is the one the session authenticated with (the
//!   broker takes a SaslHandshake even after the session ended: `SocketServer` checks it
//!   before the expiry, docs/broker-behaviour.md pin 13). A SaslAuthenticate needs an
//!   exchange whose SaslHandshake the broker accepted. Anything else closes the connection (an authenticated broker would answer it
//!   ILLEGAL_SASL_STATE and keep the connection, which is how a pipelined second exchange
//!   borrowed a principal before).
//! - **The broker's word.** The mechanism is the one of the SaslHandshake the broker answered
//!   with error 0; the user is read from the exchange's first SaslAuthenticate as Kafka's server
//!   for that mechanism reads it ([`super::sasl_claims`]); it becomes the principal when the
//!   broker answered the exchange's last round without error (PLAIN and OAUTHBEARER one round,
//!   SCRAM two; an OAUTHBEARER error challenge is not success). After authentication an error
//!   answer closes the connection, and a re-authentication must end with the same principal.
//! - An OAUTHBEARER initial response naming a key twice is refused; mechanisms mirrorgate does
//!   not read (GSSAPI, custom ones) pass in order and give no principal; SaslHandshake v0
//!   (unframed tokens follow it; removed in Kafka 4.0, KIP-896) closes the connection.
//!
//! Sans-IO: callers pass decoded fields and the time; nothing here reads a socket or a clock.

use std::time::{Duration, Instant};

use super::sasl_claims::{self, OAuthRead};

/// A SASL mechanism as SaslHandshake names it (Kafka compares names case-sensitively).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// `PLAIN` (RFC 4616).
    Plain,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512` (RFC 5802, RFC 7677).
    Scram(&'static str),
    /// `OAUTHBEARER` (RFC 7628).
    OAuthBearer,
    /// Any other (`GSSAPI`, a custom one): forwarded, no principal read.
    Other(String),
}

impl Mechanism {
    /// The mechanism named `name`.
    pub fn parse(name: &str) -> Self {
        match name {
            "PLAIN" => Mechanism::Plain,
            "SCRAM-SHA-256" => Mechanism::Scram("SCRAM-SHA-256"),
            "SCRAM-SHA-512" => Mechanism::Scram("SCRAM-SHA-512"),
            "OAUTHBEARER" => Mechanism::OAuthBearer,
            other => Mechanism::Other(other.to_string()),
        }
    }

    /// Its name in SaslHandshake.
    pub fn name(&self) -> &str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(n) => n,
            Mechanism::OAuthBearer => "OAUTHBEARER",
            Mechanism::Other(n) => n,
        }
    }

    /// SaslAuthenticate rounds the broker answers without error in a successful exchange.
    fn rounds(&self) -> u8 {
        match self {
            Mechanism::Scram(_) => 2,
            _ => 1,
        }
    }
}

/// Why a connection is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Metric label: `pipelined`, `out_of_sequence`, `mechanism_changed`, `handshake_v0`, `duplicate_key`, `refused_after_authentication`, `principal_changed`,
    /// `unpaired`, `unreadable`.
    pub kind: &'static str,
    /// For the log line.
    pub reason: String,
    /// Whether it happened after authentication (counted as a failed re-authentication).
    pub reauthenticating: bool,
}

/// What the broker's answer to a SASL request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    /// Nothing ended.
    Continue,
    /// An exchange ended as the broker answered: `ok`, and whether it was a re-authentication.
    Ended {
        /// The broker accepted it.
        ok: bool,
        /// A KIP-368 re-authentication.
        reauth: bool,
    },
    /// Close the connection; `forward`: after the answer went to the client.
    Close {
        /// Why.
        violation: Violation,
        /// Whether the client gets the broker's answer first.
        forward: bool,
    },
}

/// The session the broker granted: the last exchange it accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// `User:name`, or `None` when mirrorgate cannot name the user (a delegation token login,
    /// a message form only the broker reads).
    pub principal: Option<String>,
    /// The mechanism it authenticated with.
    pub mechanism: Mechanism,
    /// `session_lifetime_ms` of the last accepted exchange (0: no limit, no re-authentication).
    pub lifetime_ms: i64,
    /// When the broker ends the session (`None` without a lifetime).
    pub expires_at: Option<Instant>,
    /// Why mirrorgate names no principal although it read the exchange (a SaslAuthenticate
    /// v0 exchange, whose answer carries no session lifetime).
    pub why_unnamed: Option<&'static str>,
}

/// Why a session authenticated with SaslAuthenticate v0 has no principal at mirrorgate.
pub const V0_UNNAMED: &str = "the client authenticated with SaslAuthenticate v0, whose answer carries no session lifetime, so mirrorgate cannot tell when the broker ends the session (KIP-368); use a client that sends SaslAuthenticate v1 or later (Java clients since Kafka 2.2, librdkafka)";

#[derive(Debug)]
struct Exchange {
    mechanism: Mechanism,
    /// The user of the exchange's first SaslAuthenticate (`Some(None)`: read, nobody named).
    claim: Option<Option<String>>,
    rounds_ok: u8,
    reauth: bool,
}

#[derive(Debug)]
enum Phase {
    /// No exchange running.
    Idle,
    /// The broker accepted the exchange's SaslHandshake; its SaslAuthenticate rounds run.
    Exchange(Exchange),
    /// A mechanism mirrorgate does not read: SASL requests pass one at a time, no principal.
    Opaque,
}

#[derive(Debug)]
enum Awaiting {
    Handshake { correlation_id: i32, mechanism: Mechanism },
    Authenticate { correlation_id: i32 },
}

/// The SASL state of one client connection.
#[derive(Debug)]
pub struct SaslInspector {
    phase: Phase,
    awaiting: Option<Awaiting>,
    session: Option<Session>,
}

impl Default for SaslInspector {
    fn default() -> Self {
        Self { phase: Phase::Idle, awaiting: None, session: None }
    }
}

fn violation(kind: &'static str, reason: impl Into<String>, reauthenticating: bool) -> Violation {
    Violation { kind, reason: reason.into(), reauthenticating }
}

impl SaslInspector {
    /// The session the broker granted, if any.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// Whether the exchanges run with a mechanism mirrorgate does not read.
    pub fn opaque(&self) -> bool {
        matches!(self.phase, Phase::Opaque)
    }

    /// Whether the session has ended at `now` without a re-authentication.
    pub fn expired(&self, now: Instant) -> bool {
        self.session.as_ref().and_then(|s| s.expires_at).is_some_and(|t| now >= t)
    }

    fn one_at_a_time(&self) -> Result<(), Violation> {
        let id = match &self.awaiting {
            None => return Ok(()),
            Some(Awaiting::Handshake { correlation_id, .. } | Awaiting::Authenticate { correlation_id }) => {
                *correlation_id
            }
        };
        Err(violation(
            "pipelined",
            format!("a SASL request was sent before the broker answered the previous one (correlation id {id})"),
            self.session.is_some(),
        ))
    }

    /// A SaslHandshake request (`version`, `mechanism`) about to be forwarded.
    ///
    /// # Errors
    /// The [`Violation`] that closes the connection instead.
    pub fn on_handshake(&mut self, correlation_id: i32, version: i16, mechanism: &str) -> Result<(), Violation> {
        self.one_at_a_time()?;
        let reauth = self.session.is_some();
        if version < 1 {
            return Err(violation(
                "handshake_v0",
                "SaslHandshake v0 (unframed SASL tokens) is not supported through mirrorgate; use a client that sends SaslHandshake v1 (any Kafka client since 1.0)",
                reauth,
            ));
        }
        let mechanism = Mechanism::parse(mechanism);
        match (&self.phase, &self.session) {
            (Phase::Exchange(x), _) => {
                return Err(violation(
                    "out_of_sequence",
                    format!("SaslHandshake during a {} exchange", x.mechanism.name()),
                    reauth,
                ))
            }
            (Phase::Opaque, _) | (Phase::Idle, None) => {}
            (Phase::Idle, Some(s)) => {
                if s.lifetime_ms <= 0 {
                    return Err(violation(
                        "out_of_sequence",
                        "SaslHandshake after authentication, and the broker gave the session no lifetime: no KIP-368 re-authentication is possible",
                        true,
                    ));
                }
                if s.mechanism != mechanism {
                    return Err(violation(
                        "mechanism_changed",
                        format!(
                            "re-authentication with {} on a connection authenticated with {} (the broker requires the same mechanism)",
                            mechanism.name(),
                            s.mechanism.name()
                        ),
                        true,
                    ));
                }
            }
        }
        self.awaiting = Some(Awaiting::Handshake { correlation_id, mechanism });
        Ok(())
    }

    /// A SaslAuthenticate request carrying `auth_bytes`, about to be forwarded.
    ///
    /// # Errors
    /// The [`Violation`] that closes the connection instead.
    pub fn on_authenticate(&mut self, correlation_id: i32, auth_bytes: &[u8]) -> Result<(), Violation> {
        self.one_at_a_time()?;
        let reauth = self.session.is_some();
        match &mut self.phase {
            Phase::Exchange(x) => {
                if x.claim.is_none() {
                    let claim = match x.mechanism {
                        Mechanism::Plain => sasl_claims::plain_user(auth_bytes),
                        Mechanism::Scram(_) => sasl_claims::scram_user(auth_bytes),
                        Mechanism::OAuthBearer => match sasl_claims::oauthbearer_sub(auth_bytes) {
                            OAuthRead::Sub(sub) => sub,
                            OAuthRead::DuplicateKey(key) => {
                                return Err(violation(
                                    "duplicate_key",
                                    format!("OAUTHBEARER initial response names the key `{key}` twice"),
                                    reauth,
                                ))
                            }
                        },
                        Mechanism::Other(_) => None,
                    };
                    x.claim = Some(claim);
                }
            }
            Phase::Opaque => {}
            Phase::Idle => {
                let reason = if reauth {
                    "SaslAuthenticate after authentication, outside a re-authentication"
                } else {
                    "SaslAuthenticate without a SaslHandshake the broker accepted"
                };
                return Err(violation("out_of_sequence", reason, reauth));
            }
        }
        self.awaiting = Some(Awaiting::Authenticate { correlation_id });
        Ok(())
    }

    /// The broker's SaslHandshake answer.
    pub fn on_handshake_answer(&mut self, correlation_id: i32, error_code: i16) -> Answered {
        let reauth = self.session.is_some();
        let mechanism = match self.awaiting.take() {
            Some(Awaiting::Handshake { correlation_id: c, mechanism }) if c == correlation_id => mechanism,
            _ => return unpaired("SaslHandshake", correlation_id, reauth),
        };
        if matches!(self.phase, Phase::Opaque) {
            return Answered::Continue;
        }
        if error_code != 0 {
            self.phase = Phase::Idle;
            if reauth {
                return refused_after_authentication("SaslHandshake", error_code);
            }
            return Answered::Ended { ok: false, reauth: false };
        }
        self.phase = match mechanism {
            Mechanism::Other(_) => Phase::Opaque,
            mechanism => Phase::Exchange(Exchange { mechanism, claim: None, rounds_ok: 0, reauth }),
        };
        Answered::Continue
    }

    /// The broker's SaslAuthenticate answer: its error code, whether it carries auth bytes,
    /// and its `session_lifetime_ms` (-1 for a v0 answer, which has none), received at `now`.
    ///
    /// The session the answer grants ends as the broker's does (`SaslServerAuthenticator.
    /// ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs`): after a positive lifetime;
    /// at once for OAUTHBEARER with lifetime 0, which the broker answers for a token that
    /// expired before the exchange ended (every token has an expiry, so its lifetime is never
    /// "none"; the broker closes the connection at its next request, and so does mirrorgate,
    /// [`Self::expired`]). A v0 answer names no principal ([`V0_UNNAMED`]).
    pub fn on_authenticate_answer(
        &mut self,
        correlation_id: i32,
        error_code: i16,
        has_auth_bytes: bool,
        session_lifetime_ms: i64,
        now: Instant,
    ) -> Answered {
        let reauth = self.session.is_some();
        match self.awaiting.take() {
            Some(Awaiting::Authenticate { correlation_id: c }) if c == correlation_id => {}
            _ => return unpaired("SaslAuthenticate", correlation_id, reauth),
        }
        let x = match &mut self.phase {
            Phase::Exchange(x) => x,
            Phase::Opaque => return Answered::Continue,
            Phase::Idle => return unpaired("SaslAuthenticate", correlation_id, reauth),
        };
        if error_code != 0 {
            let reauth = x.reauth;
            self.phase = Phase::Idle;
            if reauth {
                return refused_after_authentication("SaslAuthenticate", error_code);
            }
            return Answered::Ended { ok: false, reauth: false };
        }
        // A refused token: error 0 with a JSON error challenge; the client's `\x01` answer then
        // gets SASL_AUTHENTICATION_FAILED (RFC 7628 §3.2.2, Kafka's `OAuthBearerSaslServer`).
        if x.mechanism == Mechanism::OAuthBearer && has_auth_bytes {
            return Answered::Continue;
        }
        x.rounds_ok += 1;
        if x.rounds_ok < x.mechanism.rounds() {
            return Answered::Continue;
        }
        let Phase::Exchange(x) = std::mem::replace(&mut self.phase, Phase::Idle) else { unreachable!("matched above") };
        let (principal, why_unnamed) = if session_lifetime_ms < 0 {
            (None, Some(V0_UNNAMED))
        } else {
            (x.claim.flatten().map(|user| format!("User:{user}")), None)
        };
        let expires_at = match u64::try_from(session_lifetime_ms) {
            Ok(0) if x.mechanism == Mechanism::OAuthBearer => Some(now),
            Ok(ms) if ms > 0 => now.checked_add(Duration::from_millis(ms)),
            _ => None,
        };
        let session_lifetime_ms = session_lifetime_ms.max(0);
        if let Some(s) = self.session.as_mut() {
            if s.principal != principal {
                return Answered::Close {
                    violation: violation(
                        "principal_changed",
                        format!(
                            "a re-authentication the broker accepted names {} instead of {} (the broker refuses a change of principal, so mirrorgate's reading differs from the broker's)",
                            principal.as_deref().unwrap_or("an unreadable principal"),
                            s.principal.as_deref().unwrap_or("an unreadable principal")
                        ),
                        true,
                    ),
                    forward: false,
                };
            }
            s.lifetime_ms = session_lifetime_ms;
            s.expires_at = expires_at;
            s.why_unnamed = why_unnamed;
            return Answered::Ended { ok: true, reauth: true };
        }
        self.session = Some(Session {
            principal,
            mechanism: x.mechanism,
            lifetime_ms: session_lifetime_ms,
            expires_at,
            why_unnamed,
        });
        Answered::Ended { ok: true, reauth: false }
    }
}

fn unpaired(api: &str, correlation_id: i32, reauth: bool) -> Answered {
    Answered::Close {
        violation: violation(
            "unpaired",
            format!("{api} answer (correlation id {correlation_id}) to no SASL request of that kind"),
            reauth,
        ),
        forward: false,
    }
}

fn refused_after_authentication(api: &str, error_code: i16) -> Answered {
    Answered::Close {
        violation: violation(
            "refused_after_authentication",
            format!(
                "the broker answered a {api} after authentication with {}",
                crate::client::cluster::KafkaErrorCode(error_code)
            ),
            true,
        ),
        forward: true,
    }
}

#[cfg(test)]
#[path = "sasl_inspect_tests.rs"]
mod tests;
