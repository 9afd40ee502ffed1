//! lintel: a push-dispatch message-bus node.
