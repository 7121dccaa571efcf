//! The small async Kafka client mirrorgate uses for its own requests (destination discovery
//! now; the data plane's fetchers and writers later), built on `kafka-protocol` messages.
//! It never decodes record payloads.

pub mod conn;

pub use conn::{BrokerConnection, ClientError};
