//! The order-risk-scorer action in Rust; the rules (and the exact output bytes, shared with the
//! AssemblyScript and C versions) are in kits/assemblyscript/examples/order-risk-scorer/README.md.
#![no_std]

use sluice_action::{Envelope, Kind, OrReject, Reject, Str, Value, Writer};

const DEFAULT_THRESHOLD: i64 = 70;
const MAX_ID_BYTES: usize = 64;
const MAX_NUMERIC_ID: i64 = 999_999_999_999_999;
const MAX_ITEM_QUANTITY: i64 = 1000;
/// The largest integer the host takes as a number in an output (2^53 - 1).
const MAX_SAFE_AMOUNT: i64 = 9_007_199_254_740_991;

sluice_action::sluice_action!(score_order);
sluice_action::sluice_panic_handler!();

#[derive(Clone, Copy)]
enum OrderId<'a> {
    Text(Str<'a>),
    Number(i64),
}

fn score_order(env: &Envelope<'_>, out: &mut Writer) -> Result<(), Reject> {
    let order = env.payload;
    if order.kind() != Kind::Object {
        return Err(Reject);
    }
    let id = order_id(order.get("order_id")).or_reject()?;
    let (threshold, threshold_source) = threshold(env.secrets.get("RISK_THRESHOLD"));

    let mut score: i64 = 0;
    let mut reasons: [&str; 4] = [""; 4];
    let mut reason_count = 0;
    let mut add = |points: i64, reason: &'static str| {
        score += points;
        reasons[reason_count] = reason;
        reason_count += 1;
    };

    let amount = order
        .get("amount_cents")
        .and_then(|v| v.as_i64())
        .filter(|cents| (-MAX_SAFE_AMOUNT..=MAX_SAFE_AMOUNT).contains(cents));
    let cents = amount.unwrap_or(0);
    if cents >= 100_000 {
        add(40, "amount_high");
    } else if cents >= 50_000 {
        add(25, "amount_elevated");
    } else if cents >= 10_000 {
        add(10, "amount_moderate");
    }

    match (country(order.get("billing")), country(order.get("shipping"))) {
        (Some(billing), Some(shipping)) => {
            if !billing.same_text(&shipping) {
                add(25, "country_mismatch");
            }
        }
        _ => add(10, "address_incomplete"),
    }

    let quantity = item_quantity(order.get("items"));
    if quantity > 10 {
        add(15, "many_items");
    } else if quantity > 5 {
        add(8, "several_items");
    }

    let is_new = order.get("customer").and_then(|c| c.get("new")).map_or(false, |v| v.is_true());
    if is_new {
        add(20, "new_customer");
    }

    let score = score.min(100);
    let status = if score > threshold { "held_for_review" } else { "approved" };

    out.begin_object().key("score").i64(score);
    out.key("projection").begin_object();
    out.key("name").str("order_risk");
    out.key("entity_type").str("order");
    write_id(out.key("entity_id"), id);
    out.key("title").begin_string().string_part("Order ");
    match id {
        OrderId::Text(text) => out.string_part_json(text),
        OrderId::Number(n) => out.string_part_i64(n),
    };
    out.string_part(": risk ").string_part_i64(score).string_part("/100").end_string();
    out.key("status").str(status);
    out.key("data").begin_object();
    out.key("threshold").i64(threshold);
    out.key("threshold_source").str(threshold_source);
    match amount {
        Some(cents) => out.key("amount_cents").i64(cents),
        None => out.key("amount_cents").null(),
    };
    out.key("item_quantity").i64(quantity);
    out.key("reasons").begin_array();
    for reason in &reasons[..reason_count] {
        out.str(reason);
    }
    out.end_array().end_object().end_object();
    out.key("derived_event").begin_object();
    out.key("type").str("orders.risk_scored");
    out.key("payload").begin_object();
    write_id(out.key("order_id"), id);
    out.key("score").i64(score);
    out.key("status").str(status);
    out.end_object().end_object().end_object();
    Ok(())
}

/// A usable id is a 1..64-byte string or an integer in 0..999999999999999.
fn order_id(value: Option<Value<'_>>) -> Option<OrderId<'_>> {
    let value = value?;
    if let Some(text) = value.as_str() {
        // "." and ".." are no entity_id the host takes (URL clients read them as path segments).
        let len = text.len();
        let usable = len != 0 && len <= MAX_ID_BYTES && !text.eq_str(".") && !text.eq_str("..");
        return if usable { Some(OrderId::Text(text)) } else { None };
    }
    let n = value.as_i64()?;
    if (0..=MAX_NUMERIC_ID).contains(&n) {
        Some(OrderId::Number(n))
    } else {
        None
    }
}

fn write_id(out: &mut Writer, id: OrderId<'_>) {
    match id {
        OrderId::Text(text) => out.str_json(text),
        OrderId::Number(n) => out.i64(n),
    };
}

/// RISK_THRESHOLD must be 1-3 ASCII digits with a value of at most 100.
fn threshold(secret: Option<Value<'_>>) -> (i64, &'static str) {
    let secret = match secret {
        Some(secret) => secret,
        None => return (DEFAULT_THRESHOLD, "default"),
    };
    let mut buf = [0u8; 3];
    let digits = secret.as_str().and_then(|text| text.copy_into(&mut buf));
    match digits {
        Some(digits) if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) => {
            let value = digits.iter().fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
            if value <= 100 {
                (value, "secret")
            } else {
                (DEFAULT_THRESHOLD, "invalid_secret")
            }
        }
        _ => (DEFAULT_THRESHOLD, "invalid_secret"),
    }
}

/// The non-empty `country` string of an address object.
fn country(address: Option<Value<'_>>) -> Option<Str<'_>> {
    let text = address?.get("country")?.as_str()?;
    if text.is_empty() {
        None
    } else {
        Some(text)
    }
}

/// Sum of item quantities: an integer >= 1 counts (capped at 1000), anything else counts 1.
fn item_quantity(items: Option<Value<'_>>) -> i64 {
    match items {
        Some(items) if items.kind() == Kind::Array => items
            .items()
            .map(|item| {
                match item.get("quantity").and_then(|q| q.as_i64()) {
                    Some(q) if q >= 1 => q.min(MAX_ITEM_QUANTITY),
                    _ => 1,
                }
            })
            .sum(),
        _ => 0,
    }
}
