//! protocol-client: The gateway's translator that speaks the storage RPC to one storage server (under construction).
