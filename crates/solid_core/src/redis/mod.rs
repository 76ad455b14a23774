//! The Redis backend: keys, the Lua scripts and their typed wrappers, the
//! connections, the doorbell, and the job source a worker node runs on them.
//!
//! Dependencies run downwards: `connection` and `keyspace` need nothing
//! else here; `scripts` and `claim` (the claim hash record) feed `store`
//! (one method per state transition); `doorbell` turns pub/sub into local
//! wake-ups; `holdings` is what a node holds, for its heartbeat to
//! reconcile its claims against; `scheduler` proposes recurring ticks; `source`
//! ([`source::RedisSource`]) puts them all to work. The
//! SolidEngine backend ([`crate::engine`]) speaks RESP too and borrows
//! `connection` for its transport.

pub mod claim;
pub mod connection;
pub mod doorbell;
pub mod holdings;
pub mod keyspace;
pub mod scheduler;
pub mod scripts;
pub mod source;
pub mod store;
mod store_pause;
mod store_priority;
mod store_rate;
