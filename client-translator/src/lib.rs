//! client-translator: CMCache: answers lookup, getattr and read from the cache bank (under construction).
