//! The locks and atomics the driver uses, swappable for a deterministic scheduler.
//!
//! Normally these are `parking_lot`'s locks and `std`'s atomics. With the `shuttle` feature
//! (tests only: `cargo test -p stampede --features shuttle --test interleavings`) they are
//! [shuttle](https://docs.rs/shuttle)'s, whose seeded scheduler then decides which thread runs at
//! every lock and atomic operation — so the interleaving tests drive this crate's real code
//! through chosen interleavings and replay any failure from its seed.

#[cfg(not(feature = "shuttle"))]
pub(crate) use parking_lot::{Mutex, MutexGuard, RwLock};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::MutexGuard;
#[cfg(feature = "shuttle")]
pub(crate) use shuttled::{Mutex, RwLock};

/// Locks `mutex`; when another thread holds it, the wait is a `Lock` span of the event log (an
/// uncontended lock logs nothing: one `try_lock`).
pub(crate) fn lock_traced<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    if let Some(guard) = mutex.try_lock() {
        return guard;
    }
    let _waiting = crate::trace::span(crate::trace::Kind::Lock, 0, 0, 0);
    mutex.lock()
}

/// `parking_lot`'s guard-returning API over shuttle's poisoning locks (a poisoned lock means a
/// thread panicked under it: the test has failed already, so propagate).
#[cfg(feature = "shuttle")]
mod shuttled {
    #[derive(Default)]
    pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(shuttle::sync::Mutex::new(value))
        }
        pub(crate) fn lock(&self) -> shuttle::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
        }
        pub(crate) fn try_lock(&self) -> Option<shuttle::sync::MutexGuard<'_, T>> {
            match self.0.try_lock() {
                Ok(guard) => Some(guard),
                Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }
    }

    #[derive(Default)]
    pub(crate) struct RwLock<T>(shuttle::sync::RwLock<T>);

    impl<T> RwLock<T> {
        pub(crate) fn new(value: T) -> RwLock<T> {
            RwLock(shuttle::sync::RwLock::new(value))
        }
        pub(crate) fn read(&self) -> shuttle::sync::RwLockReadGuard<'_, T> {
            self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner())
        }
        pub(crate) fn write(&self) -> shuttle::sync::RwLockWriteGuard<'_, T> {
            self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner())
        }
    }
}
