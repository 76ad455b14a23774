pub mod convert;
pub mod errors;
pub mod nogvl;
