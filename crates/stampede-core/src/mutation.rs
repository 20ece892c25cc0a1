//! A fault switch for mutation tests: a simulation switches a deliberate fault on in a protocol
//! machine to show that its checker catches it. Without the `mutations` feature the switch holds
//! nothing and is never on, so a release build carries no fault and no cost.

use std::marker::PhantomData;

/// Which fault of kind `M` is switched on, if any (never, without the `mutations` feature).
#[derive(Clone, Copy, Debug)]
pub struct Switch<M> {
    #[cfg(feature = "mutations")]
    on: Option<M>,
    kind: PhantomData<M>,
}

impl<M> Default for Switch<M> {
    fn default() -> Self {
        Switch {
            #[cfg(feature = "mutations")]
            on: None,
            kind: PhantomData,
        }
    }
}

impl<M: PartialEq> Switch<M> {
    /// Switches `fault` on (tests of a checker only).
    #[cfg(feature = "mutations")]
    pub fn set(&mut self, fault: M) {
        self.on = Some(fault);
    }

    /// Whether `fault` is switched on.
    pub fn is(&self, fault: M) -> bool {
        #[cfg(feature = "mutations")]
        return self.on.as_ref() == Some(&fault);
        #[cfg(not(feature = "mutations"))]
        {
            drop(fault);
            false
        }
    }
}
