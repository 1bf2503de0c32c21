//! cache-proto: memcached text, meta and binary protocol parse/compose; no I/O (under construction).
