//! The native half of Stampede's Java client (JNI). Being written.
