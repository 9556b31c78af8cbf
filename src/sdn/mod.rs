//! The node controller: the seed ovsController's operations, natively.

pub mod dns;
pub mod egress;
pub mod flows;
pub mod state;
pub mod store;
pub mod types;
