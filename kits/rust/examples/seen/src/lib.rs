//! The smallest action, as the kit's README shows it: answers {"seen": <payload.id>}, or rejects
//! a payload without an id. Built and run by test/kits/kits.test.ts, so the README's snippet compiles.
#![no_std]
use sluice_action::{Envelope, OrReject, Reject, Writer};

fn handle(env: &Envelope<'_>, out: &mut Writer) -> Result<(), Reject> {
    let id = env.payload.get("id").or_reject()?; // Err(Reject): execute returns 0
    out.begin_object().key("seen").raw(id).end_object();
    Ok(())
}

sluice_action::sluice_action!(handle); // exports alloc + execute
sluice_action::sluice_panic_handler!(); // no_std only: a panic becomes a wasm trap
