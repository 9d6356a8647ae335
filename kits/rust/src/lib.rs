//! The Sluice action kit for Rust: exports the guest ABI of DESIGN 6.5 (`memory`, `alloc`,
//! `execute`) from one macro, and hands the handler a validated, zero-copy JSON envelope.
//!
//! ```ignore
//! #![no_std]
//! use sluice_action::{Envelope, OrReject, Reject, Writer};
//! fn handle(env: &Envelope, out: &mut Writer) -> Result<(), Reject> {
//!     let id = env.payload.get("id").or_reject()?;
//!     out.begin_object().key("id").raw(id).end_object();
//!     Ok(())
//! }
//! sluice_action::sluice_action!(handle);
//! sluice_action::sluice_panic_handler!();
//! ```
#![no_std]

mod json;
mod json_str;
mod validate;

#[cfg(target_arch = "wasm32")]
pub mod abi;
#[cfg(target_arch = "wasm32")]
mod arena;
#[cfg(target_arch = "wasm32")]
mod envelope;
#[cfg(target_arch = "wasm32")]
mod writer;

pub use json::{Items, Kind, Members, Value};
pub use json_str::{Str, StrBytes};
pub use validate::{parse, MAX_DEPTH};

#[cfg(target_arch = "wasm32")]
pub use envelope::Envelope;
#[cfg(target_arch = "wasm32")]
pub use writer::{Writer, MAX_OUTPUT_BYTES};

/// The handler's way to say "this payload is not for me": `execute` returns 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reject;

/// `option.or_reject()?` inside a handler.
pub trait OrReject<T> {
    fn or_reject(self) -> Result<T, Reject>;
}

impl<T> OrReject<T> for Option<T> {
    fn or_reject(self) -> Result<T, Reject> {
        self.ok_or(Reject)
    }
}

/// Generates the `alloc` and `execute` exports around
/// `fn handler(&Envelope, &mut Writer) -> Result<(), Reject>`. `memory` is exported by the
/// linker. Invoke it once, at the crate root of a `cdylib`.
#[macro_export]
macro_rules! sluice_action {
    ($handler:path) => {
        #[no_mangle]
        pub extern "C" fn alloc(len: i32) -> i32 {
            $crate::abi::alloc(len)
        }

        #[no_mangle]
        pub extern "C" fn execute(ptr: i32, len: i32) -> i32 {
            $crate::abi::execute(ptr, len, $handler)
        }
    };
}

/// For `#![no_std]` actions: a panic becomes a wasm trap (`unreachable`), which the host
/// reports as a failed step. Actions that link `std` already have a panic handler.
#[macro_export]
macro_rules! sluice_panic_handler {
    () => {
        #[panic_handler]
        fn sluice_panic(_info: &core::panic::PanicInfo) -> ! {
            core::arch::wasm32::unreachable()
        }
    };
}
