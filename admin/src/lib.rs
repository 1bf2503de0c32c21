//! admin: the gateway admin API (under construction by the ops helper).
