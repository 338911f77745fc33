//! StrataKV
