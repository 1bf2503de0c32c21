//! cache-bank: Async client for a bank of memcached-compatible nodes: placement, pipelined multi-get, health, timeouts (under construction).
