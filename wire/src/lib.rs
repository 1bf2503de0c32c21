//! wire: The storage RPC: versioned handshake, framing and the codec of file operations (under construction).
