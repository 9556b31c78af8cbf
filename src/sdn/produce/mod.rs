//! The flow producers whose flows follow the store's selector groups incrementally: the
//! NetworkPolicy mode's (`netpol/`) and the cluster admin tiers' (`admin.rs`). The seed's entities' flows are functions of one entity
//! each (`core/desired.rs`).

pub mod admin;
pub mod audit;
pub mod netpol;
