//! The HA configuration's checks (the heartbeat's are beside it, in `heartbeat.rs`).

use super::*;

#[test]
fn config_is_checked() {
    let good = HaConfig {
        id: 1,
        controllers: vec!["tcp:127.0.0.1:6653".into()],
        heartbeat_ms: 200,
        takeover_ms: 1000,
    };
    assert!(good.validate().is_ok());
    assert!(HaConfig {
        id: 0,
        ..good.clone()
    }
    .validate()
    .is_err());
    assert!(HaConfig {
        controllers: vec![],
        ..good.clone()
    }
    .validate()
    .is_err());
    assert!(HaConfig {
        takeover_ms: 400,
        ..good
    }
    .validate()
    .is_err());
}
