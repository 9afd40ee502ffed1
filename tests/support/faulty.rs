//! A fault-injecting loopback network for cluster tests.
