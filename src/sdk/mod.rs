//! Worker and producer SDKs.
