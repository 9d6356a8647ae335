/* sluice_writer.h: the output writer of the C kit (included by sluice_action.h, not on its own).
 * Compact JSON with JSON.stringify's escaping, appended in the arena, NUL-terminated at the end. */
#ifndef SLUICE_WRITER_H
#define SLUICE_WRITER_H

static struct {
  uint8_t *start;
  size_t len, capacity;
  bool need_comma;
} sl__out;

static inline void sl__writer_reset(void) {
  sl__out.capacity = 1024;
  sl__out.start = (uint8_t *)sl_arena_alloc(sl__out.capacity);
  sl__out.len = 0;
  sl__out.need_comma = false;
}

/* Grows in place when the buffer is the newest arena block, else moves it. A document past
 * SL_MAX_OUTPUT_BYTES traps: the host could never read it. */
static void sl__writer_grow(size_t extra) {
  size_t need = sl__out.len + extra;
  if (need > SL_MAX_OUTPUT_BYTES + 1) SL_TRAP();
  size_t capacity = sl__out.capacity * 2;
  while (capacity < need) capacity *= 2;
  /* Never past the limit: every byte beyond it comes back here and traps. */
  if (capacity > SL_MAX_OUTPUT_BYTES + 1) capacity = SL_MAX_OUTPUT_BYTES + 1;
  if (sl_arena_top() == (size_t)(sl__out.start + sl__out.capacity)) {
    sl__arena_extend_top(capacity - sl__out.capacity);
  } else {
    uint8_t *moved = (uint8_t *)sl_arena_alloc(capacity);
    for (size_t i = 0; i < sl__out.len; i++) moved[i] = sl__out.start[i];
    sl__out.start = moved;
  }
  sl__out.capacity = capacity;
}

static inline void sl__byte(uint8_t b) {
  if (sl__out.len == sl__out.capacity) sl__writer_grow(1);
  sl__out.start[sl__out.len++] = b;
}

static inline void sl__bytes(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) sl__byte(p[i]);
}

static inline void sl__ascii(const char *text) {
  while (*text) sl__byte((uint8_t)*text++);
}

static inline void sl__before_value(void) {
  if (sl__out.need_comma) sl__byte(',');
  sl__out.need_comma = true;
}

/* One byte of UTF-8 text inside a string; multi-byte sequences never contain bytes below
 * 0x80, so escaping byte by byte is exact. */
static inline void sl__escaped(uint8_t b) {
  static const char hex[] = "0123456789abcdef";
  switch (b) {
    case '"': sl__ascii("\\\""); return;
    case '\\': sl__ascii("\\\\"); return;
    case 0x08: sl__ascii("\\b"); return;
    case '\t': sl__ascii("\\t"); return;
    case '\n': sl__ascii("\\n"); return;
    case 0x0c: sl__ascii("\\f"); return;
    case '\r': sl__ascii("\\r"); return;
    default: break;
  }
  if (b >= 0x20) {
    sl__byte(b);
    return;
  }
  sl__ascii("\\u00");
  sl__byte((uint8_t)hex[b >> 4]);
  sl__byte((uint8_t)hex[b & 15]);
}

static inline void sl__decimal(int64_t value) {
  uint8_t digits[20];
  size_t at = sizeof digits;
  uint64_t magnitude = value < 0 ? 0u - (uint64_t)value : (uint64_t)value;
  if (value < 0) sl__byte('-');
  do {
    digits[--at] = (uint8_t)('0' + magnitude % 10u);
    magnitude /= 10u;
  } while (magnitude != 0);
  sl__bytes(digits + at, sizeof digits - at);
}

static inline void sl_begin_object(void) { sl__before_value(); sl__byte('{'); sl__out.need_comma = false; }
static inline void sl_end_object(void) { sl__byte('}'); sl__out.need_comma = true; }
static inline void sl_begin_array(void) { sl__before_value(); sl__byte('['); sl__out.need_comma = false; }
static inline void sl_end_array(void) { sl__byte(']'); sl__out.need_comma = true; }
static inline void sl_null(void) { sl__before_value(); sl__ascii("null"); }
static inline void sl_bool(bool value) { sl__before_value(); sl__ascii(value ? "true" : "false"); }
static inline void sl_i64(int64_t value) { sl__before_value(); sl__decimal(value); }

/* Starts a string built from parts; finish it with sl_end_string. */
static inline void sl_begin_string(void) { sl__before_value(); sl__byte('"'); }
static inline void sl_end_string(void) { sl__byte('"'); }
static inline void sl_string_part(const char *text) { while (*text) sl__escaped((uint8_t)*text++); }
static inline void sl_string_part_i64(int64_t value) { sl__decimal(value); }

/* Appends the decoded text of a string value from the input, re-escaped canonically. */
static inline void sl_string_part_json(sl_value str) {
  sl_str_iter it = sl_str_bytes(str);
  for (int b; (b = sl_str_next(&it)) >= 0;) sl__escaped((uint8_t)b);
}

static inline void sl_str(const char *text) { sl_begin_string(); sl_string_part(text); sl_end_string(); }
static inline void sl_str_json(sl_value str) { sl_begin_string(); sl_string_part_json(str); sl_end_string(); }

/* An object key; the next call writes its value. */
static inline void sl_key(const char *key) { sl_str(key); sl__byte(':'); sl__out.need_comma = false; }

/* Copies a validated input value verbatim (including any whitespace inside it). */
static inline void sl_raw(sl_value value) { sl__before_value(); sl__bytes(value.p, value.n); }

/* NUL-terminates the document and returns its address. */
static inline size_t sl__writer_finish(void) {
  sl__byte(0);
  return (size_t)sl__out.start;
}

#endif
