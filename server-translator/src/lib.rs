//! server-translator: SMCache: keeps the cache bank fresh after each storage operation (under construction).
