//! Token sampling (placeholder, filled below).
