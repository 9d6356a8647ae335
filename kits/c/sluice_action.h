/* sluice_action.h: the Sluice action kit for C. Owns the guest ABI exports (alloc, execute via
 * SLUICE_ACTION), a bump arena, a strict zero-copy JSON reader and a compact JSON writer.
 *
 * Single-file actions: include this header in exactly one translation unit, then write
 *   static bool handle(const sl_envelope *env) { ... sl_begin_object(); ... return true; }
 *   SLUICE_ACTION(handle)
 * and build with
 *   clang --target=wasm32 -O2 -ffreestanding -nostdlib -mbulk-memory \
 *         -Wl,--no-entry -Wl,--stack-first -Wl,--export=alloc -Wl,--export=execute action.c -o action.wasm
 * Returning false rejects the payload (execute returns 0). Every run gets a fresh instance,
 * so nothing is ever freed. */
#ifndef SLUICE_ACTION_H
#define SLUICE_ACTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(__wasm32__)
#error "sluice_action.h targets wasm32 (clang --target=wasm32)"
#endif

/* Arrays and objects nested deeper than this are refused. The envelope itself is level 1, so a
   payload of 128 levels, the deepest Sluice stores (a webhook body is the payload), reaches 129. */
#define SL_MAX_DEPTH 129
/* The host reads at most this many bytes before the NUL (DESIGN 6.5). */
#define SL_MAX_OUTPUT_BYTES (256u * 1024u)

#define SL_TRAP() __builtin_trap()

/* ---- arena ---------------------------------------------------------------------------- */

extern unsigned char __heap_base; /* defined by wasm-ld: first byte after data and stack */
static size_t sl__top;

static inline size_t sl_arena_top(void) {
  if (sl__top == 0) sl__top = ((size_t)&__heap_base + 7u) & ~(size_t)7u;
  return sl__top;
}

static inline bool sl__ensure_memory(size_t end) {
  size_t have = __builtin_wasm_memory_size(0) * 65536u;
  if (end <= have) return true;
  size_t pages = (end - have + 65535u) / 65536u;
  return __builtin_wasm_memory_grow(0, pages) != (size_t)-1;
}

/* Reserves len bytes (8-byte aligned) at the top of the arena, growing memory; NULL when
 * memory is exhausted. */
static inline void *sl_arena_try_alloc(size_t len) {
  size_t start = (sl_arena_top() + 7u) & ~(size_t)7u;
  size_t end = start + len;
  if (end < start || !sl__ensure_memory(end)) return 0;
  sl__top = end;
  return (void *)start;
}

/* sl_arena_try_alloc that traps when memory is exhausted. */
static inline void *sl_arena_alloc(size_t len) {
  void *p = sl_arena_try_alloc(len);
  if (!p) SL_TRAP();
  return p;
}

/* Grows the newest block (the one ending at the top) by extra bytes, in place; traps when
 * memory is exhausted. */
static inline void sl__arena_extend_top(size_t extra) {
  size_t end = sl_arena_top() + extra;
  if (end < extra || !sl__ensure_memory(end)) SL_TRAP();
  sl__top = end;
}

__attribute__((export_name("alloc"))) int32_t alloc(int32_t len) {
  if (len < 0) SL_TRAP();
  return (int32_t)(size_t)sl_arena_alloc((size_t)len);
}

/* ---- values ----------------------------------------------------------------------------- */

typedef enum { SL_MISSING, SL_NULL, SL_BOOL, SL_NUMBER, SL_STRING, SL_ARRAY, SL_OBJECT } sl_kind;

/* The skip index of one parsed document: ends[i] is the end offset (exclusive, from base) of
 * the string or container starting at byte i; other slots are never read. */
typedef struct {
  const uint8_t *base;
  const uint32_t *ends;
} sl__doc;

/* One validated JSON value: its exact bytes (no surrounding whitespace) and its document's
 * skip index (NULL: accessors scan instead). n == 0 is "missing". */
typedef struct {
  const uint8_t *p;
  size_t n;
  const sl__doc *doc;
} sl_value;

static const sl_value SL_MISSING_VALUE = {0, 0, 0};
static const sl_value SL_NULL_VALUE = {(const uint8_t *)"null", 4, 0};

static inline sl_kind sl_kind_of(sl_value v) {
  if (v.n == 0) return SL_MISSING;
  switch (v.p[0]) {
    case 'n': return SL_NULL;
    case 't': case 'f': return SL_BOOL;
    case '"': return SL_STRING;
    case '[': return SL_ARRAY;
    case '{': return SL_OBJECT;
    default: return SL_NUMBER;
  }
}

static inline bool sl_is_true(sl_value v) { return v.n == 4 && v.p[0] == 't'; }
static inline bool sl_is_null(sl_value v) { return sl_kind_of(v) == SL_NULL; }

/* An integer literal (no fraction, no exponent) that fits in an int64_t. */
static inline bool sl_as_i64(sl_value v, int64_t *out) {
  if (sl_kind_of(v) != SL_NUMBER) return false;
  size_t i = 0;
  bool negative = v.p[0] == '-';
  if (negative) i = 1;
  uint64_t magnitude = 0;
  for (; i < v.n; i++) {
    uint8_t c = v.p[i];
    if (c < '0' || c > '9') return false;
    uint64_t digit = (uint64_t)(c - '0');
    if (magnitude > (UINT64_MAX - digit) / 10u) return false;
    magnitude = magnitude * 10u + digit;
  }
  if (magnitude > (negative ? (uint64_t)1 << 63 : (uint64_t)INT64_MAX)) return false;
  /* Two's complement: the magnitude 2^63 wraps to INT64_MIN, as wanted. */
  *out = negative ? (int64_t)(0u - magnitude) : (int64_t)magnitude;
  return true;
}

#include "sluice_json.h"
#include "sluice_writer.h"

/* ---- envelope and execute ---------------------------------------------------------------- */

/* The input envelope; a member the host left out is a JSON null. */
typedef struct {
  sl_value payload, secrets, permissions, action;
} sl_envelope;

static inline sl_value sl__member_or_null(sl_value root, const char *key) {
  sl_value v = sl_get(root, key);
  return v.n == 0 ? SL_NULL_VALUE : v;
}

/* The secret key as a JSON string value, or missing when the host did not inject it. */
static inline sl_value sl_secret(const sl_envelope *env, const char *key) {
  sl_value v = sl_get(env->secrets, key);
  return sl_kind_of(v) == SL_STRING ? v : SL_MISSING_VALUE;
}

static inline bool sl_has_permission(const sl_envelope *env, const char *permission) {
  sl_iter it = sl_items(env->permissions);
  sl_value granted;
  while (sl_next_item(&it, &granted)) {
    if (sl_kind_of(granted) == SL_STRING && sl_str_eq(granted, permission)) return true;
  }
  return false;
}

typedef bool (*sl_handler)(const sl_envelope *env);

static inline int32_t sl__execute(int32_t ptr, int32_t len, sl_handler handler) {
  if (len < 0) return 0;
  sl_value root;
  if (!sl_parse((const uint8_t *)(size_t)ptr, (size_t)len, &root) || sl_kind_of(root) != SL_OBJECT) return 0;
  sl_envelope env = {
      sl__member_or_null(root, "payload"),
      sl__member_or_null(root, "secrets"),
      sl__member_or_null(root, "permissions"),
      sl__member_or_null(root, "action"),
  };
  sl__writer_reset();
  if (!handler(&env)) return 0;
  return (int32_t)sl__writer_finish();
}

/* Defines the `execute` export around handler; `memory` is exported by the linker. */
#define SLUICE_ACTION(handler)                                              \
  __attribute__((export_name("execute"))) int32_t execute(int32_t ptr, int32_t len) { \
    return sl__execute(ptr, len, handler);                                  \
  }

#endif
