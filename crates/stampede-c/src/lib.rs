//! Stampede's C ABI (SPEC §8): `stampede.h`, every function prefixed `stp_`. Being written.
