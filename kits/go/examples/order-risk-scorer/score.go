// The order-risk-scorer action in Go (UNVERIFIED as wasm: see kits/go/README.md); the rules and
// exact output bytes are in kits/assemblyscript/examples/order-risk-scorer/README.md.
package main

import "sluice.example/kits/go/sluice"

const (
	defaultThreshold = 70
	maxIDBytes       = 64
	maxNumericID     = 999_999_999_999_999
	maxItemQuantity  = 1000
	// The largest integer the host takes as a number in an output (2^53 - 1).
	maxSafeAmount = 9_007_199_254_740_991
)

type orderID struct {
	text   sluice.Str
	isText bool
	number int64
}

func scoreOrder(env *sluice.Envelope, out *sluice.Writer) bool {
	order := env.Payload
	if order.Kind() != sluice.Object {
		return false
	}
	idValue, ok := order.Get("order_id")
	if !ok {
		return false
	}
	id, ok := readOrderID(idValue)
	if !ok {
		return false
	}
	secret, hasSecret := env.Secrets.Get("RISK_THRESHOLD")
	threshold, thresholdSource := readThreshold(secret, hasSecret)

	var score int64
	var reasons []string
	add := func(points int64, reason string) {
		score += points
		reasons = append(reasons, reason)
	}

	amount, hasAmount := int64(0), false
	if value, ok := order.Get("amount_cents"); ok {
		amount, hasAmount = value.Int64()
	}
	if hasAmount && (amount > maxSafeAmount || amount < -maxSafeAmount) {
		amount, hasAmount = 0, false
	}
	switch {
	case amount >= 100000:
		add(40, "amount_high")
	case amount >= 50000:
		add(25, "amount_elevated")
	case amount >= 10000:
		add(10, "amount_moderate")
	}

	billing, hasBilling := country(order, "billing")
	shipping, hasShipping := country(order, "shipping")
	if !hasBilling || !hasShipping {
		add(10, "address_incomplete")
	} else if !billing.SameText(shipping) {
		add(25, "country_mismatch")
	}

	quantity := itemQuantity(order)
	if quantity > 10 {
		add(15, "many_items")
	} else if quantity > 5 {
		add(8, "several_items")
	}

	if customer, ok := order.Get("customer"); ok {
		if isNew, ok := customer.Get("new"); ok && isNew.IsTrue() {
			add(20, "new_customer")
		}
	}

	if score > 100 {
		score = 100
	}
	status := "approved"
	if score > threshold {
		status = "held_for_review"
	}

	out.BeginObject().Key("score").Int(score)
	out.Key("projection").BeginObject()
	out.Key("name").String("order_risk")
	out.Key("entity_type").String("order")
	writeID(out.Key("entity_id"), id)
	out.Key("title").BeginString().StringPart("Order ")
	if id.isText {
		out.StringPartJSON(id.text)
	} else {
		out.StringPartInt(id.number)
	}
	out.StringPart(": risk ").StringPartInt(score).StringPart("/100").EndString()
	out.Key("status").String(status)
	out.Key("data").BeginObject()
	out.Key("threshold").Int(threshold)
	out.Key("threshold_source").String(thresholdSource)
	if hasAmount {
		out.Key("amount_cents").Int(amount)
	} else {
		out.Key("amount_cents").Null()
	}
	out.Key("item_quantity").Int(quantity)
	out.Key("reasons").BeginArray()
	for _, reason := range reasons {
		out.String(reason)
	}
	out.EndArray().EndObject().EndObject()
	out.Key("derived_event").BeginObject()
	out.Key("type").String("orders.risk_scored")
	out.Key("payload").BeginObject()
	writeID(out.Key("order_id"), id)
	out.Key("score").Int(score)
	out.Key("status").String(status)
	out.EndObject().EndObject().EndObject()
	return true
}

// readOrderID accepts a 1..64-byte string or an integer in 0..999999999999999.
func readOrderID(value sluice.Value) (orderID, bool) {
	if text, ok := value.Str(); ok {
		// "." and ".." are no entity_id the host takes (URL clients read them as path segments).
		n := text.Len()
		return orderID{text: text, isText: true}, n >= 1 && n <= maxIDBytes && !text.Equal(".") && !text.Equal("..")
	}
	n, ok := value.Int64()
	return orderID{number: n}, ok && n >= 0 && n <= maxNumericID
}

func writeID(out *sluice.Writer, id orderID) {
	if id.isText {
		out.StringJSON(id.text)
	} else {
		out.Int(id.number)
	}
}

// readThreshold: RISK_THRESHOLD must be 1-3 ASCII digits with a value of at most 100.
func readThreshold(secret sluice.Value, present bool) (int64, string) {
	if !present {
		return defaultThreshold, "default"
	}
	text, ok := secret.Str()
	if !ok {
		return defaultThreshold, "invalid_secret"
	}
	digits := text.Decode(nil)
	if len(digits) == 0 || len(digits) > 3 {
		return defaultThreshold, "invalid_secret"
	}
	var value int64
	for _, d := range digits {
		if d < '0' || d > '9' {
			return defaultThreshold, "invalid_secret"
		}
		value = value*10 + int64(d-'0')
	}
	if value > 100 {
		return defaultThreshold, "invalid_secret"
	}
	return value, "secret"
}

// country returns the non-empty `country` string of the address object at key.
func country(order sluice.Value, key string) (sluice.Str, bool) {
	address, ok := order.Get(key)
	if !ok {
		return sluice.Str{}, false
	}
	value, ok := address.Get("country")
	if !ok {
		return sluice.Str{}, false
	}
	text, ok := value.Str()
	return text, ok && !text.Empty()
}

// itemQuantity sums item quantities: an integer >= 1 counts (capped at 1000), else 1.
func itemQuantity(order sluice.Value) int64 {
	items, ok := order.Get("items")
	if !ok {
		return 0
	}
	var total int64
	items.Each(func(item sluice.Value) bool {
		counted := int64(1)
		if quantity, ok := item.Get("quantity"); ok {
			if q, ok := quantity.Int64(); ok && q >= 1 {
				counted = q
				if counted > maxItemQuantity {
					counted = maxItemQuantity
				}
			}
		}
		total += counted
		return true
	})
	return total
}
