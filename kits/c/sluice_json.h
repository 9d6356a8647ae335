/* sluice_json.h: the JSON reader of the C kit (included by sluice_action.h, not on its own).
 * sl_parse validates the whole input once (RFC 8259, depth, no lone surrogate escapes) and
 * fills a skip index; the accessors then walk the validated bytes lazily, without copying,
 * jumping over nested values in O(1). */
#ifndef SLUICE_JSON_H
#define SLUICE_JSON_H

/* ---- validation ------------------------------------------------------------------------- */

typedef struct {
  const uint8_t *s;
  size_t n, pos;
  uint32_t *ends; /* the skip index being filled, or NULL */
} sl__cursor;

static inline void sl__record(sl__cursor *c, size_t start) {
  if (c->ends) c->ends[start] = (uint32_t)c->pos;
}

static inline int sl__peek(const sl__cursor *c) { return c->pos < c->n ? c->s[c->pos] : -1; }

static inline void sl__ws(sl__cursor *c) {
  while (c->pos < c->n) {
    uint8_t b = c->s[c->pos];
    if (b != ' ' && b != '\t' && b != '\n' && b != '\r') return;
    c->pos++;
  }
}

static inline bool sl__word(sl__cursor *c, const char *word, size_t len) {
  if (c->n - c->pos < len) return false;
  for (size_t i = 0; i < len; i++)
    if (c->s[c->pos + i] != (uint8_t)word[i]) return false;
  c->pos += len;
  return true;
}

static inline size_t sl__digits(sl__cursor *c) {
  size_t start = c->pos;
  while (c->pos < c->n && c->s[c->pos] >= '0' && c->s[c->pos] <= '9') c->pos++;
  return c->pos - start;
}

static inline bool sl__number(sl__cursor *c) {
  if (sl__peek(c) == '-') c->pos++;
  if (sl__peek(c) == '0') c->pos++;
  else if (sl__digits(c) == 0) return false;
  if (sl__peek(c) == '.') {
    c->pos++;
    if (sl__digits(c) == 0) return false;
  }
  if (sl__peek(c) == 'e' || sl__peek(c) == 'E') {
    c->pos++;
    if (sl__peek(c) == '+' || sl__peek(c) == '-') c->pos++;
    if (sl__digits(c) == 0) return false;
  }
  return true;
}

static inline int sl__hex(uint8_t d) {
  if (d >= '0' && d <= '9') return d - '0';
  if (d >= 'a' && d <= 'f') return d - 'a' + 10;
  if (d >= 'A' && d <= 'F') return d - 'A' + 10;
  return -1;
}

/* Four hex digits at p (caller checked bounds) as a code unit, or -1. */
static inline int32_t sl__hex4(const uint8_t *p) {
  int32_t unit = 0;
  for (int i = 0; i < 4; i++) {
    int d = sl__hex(p[i]);
    if (d < 0) return -1;
    unit = (unit << 4) | d;
  }
  return unit;
}

static inline bool sl__string(sl__cursor *c) {
  size_t start = c->pos++;
  for (;;) {
    /* The hot loop of the kit: plain bytes are scanned in locals (uint8_t loads may alias
     * the cursor, which would otherwise be stored back on every byte). */
    const uint8_t *s = c->s;
    size_t pos = c->pos, n = c->n;
    while (pos < n && s[pos] != '"' && s[pos] != '\\' && s[pos] >= 0x20) pos++;
    c->pos = pos;
    if (c->pos >= c->n) return false;
    uint8_t b = c->s[c->pos++];
    if (b == '"') {
      sl__record(c, start);
      return true;
    }
    if (b < 0x20) return false;
    if (c->pos >= c->n) return false;
    uint8_t e = c->s[c->pos++];
    switch (e) {
      case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't': continue;
      case 'u': break;
      default: return false;
    }
    if (c->n - c->pos < 4) return false;
    int32_t unit = sl__hex4(c->s + c->pos);
    c->pos += 4;
    if (unit < 0 || (unit >= 0xdc00 && unit <= 0xdfff)) return false;
    if (unit >= 0xd800 && unit <= 0xdbff) {
      if (c->n - c->pos < 6 || c->s[c->pos] != '\\' || c->s[c->pos + 1] != 'u') return false;
      int32_t low = sl__hex4(c->s + c->pos + 2);
      if (low < 0xdc00 || low > 0xdfff) return false;
      c->pos += 6;
    }
  }
}

static bool sl__value(sl__cursor *c, int depth);

static bool sl__container(sl__cursor *c, int depth, uint8_t close, bool object) {
  if (depth > SL_MAX_DEPTH) return false;
  size_t start = c->pos++;
  sl__ws(c);
  if (sl__peek(c) == close) {
    c->pos++;
    sl__record(c, start);
    return true;
  }
  for (;;) {
    if (object) {
      if (sl__peek(c) != '"' || !sl__string(c)) return false;
      sl__ws(c);
      if (sl__peek(c) != ':') return false;
      c->pos++;
      sl__ws(c);
    }
    if (!sl__value(c, depth + 1)) return false;
    sl__ws(c);
    int next = sl__peek(c);
    c->pos++;
    if (next == close) {
      sl__record(c, start);
      return true;
    }
    if (next != ',') return false;
    sl__ws(c);
  }
}

static bool sl__value(sl__cursor *c, int depth) {
  switch (sl__peek(c)) {
    case '{': return sl__container(c, depth, '}', true);
    case '[': return sl__container(c, depth, ']', false);
    case '"': return sl__string(c);
    case 't': return sl__word(c, "true", 4);
    case 'f': return sl__word(c, "false", 5);
    case 'n': return sl__word(c, "null", 4);
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9': return sl__number(c);
    default: return false;
  }
}

/* Validates [p, p + n) as exactly one JSON document and returns it in *out. The skip index
 * takes 4 bytes per input byte from the arena; without room for it the accessors scan. */
static inline bool sl_parse(const uint8_t *p, size_t n, sl_value *out) {
  sl__doc *doc = (sl__doc *)sl_arena_try_alloc(sizeof(sl__doc));
  uint32_t *ends = doc && n <= SIZE_MAX / 4u ? (uint32_t *)sl_arena_try_alloc(n * 4u) : 0;
  sl__cursor c = {p, n, 0, ends};
  sl__ws(&c);
  size_t start = c.pos;
  if (!sl__value(&c, 1)) return false;
  size_t end = c.pos;
  sl__ws(&c);
  if (c.pos != n) return false;
  if (ends) {
    doc->base = p;
    doc->ends = ends;
  }
  out->p = p + start;
  out->n = end - start;
  out->doc = ends ? doc : 0;
  return true;
}

/* ---- lazy access over validated bytes ---------------------------------------------------- */

static inline size_t sl__skip_ws(const uint8_t *s, size_t n, size_t pos) {
  while (pos < n && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r')) pos++;
  return pos;
}

static inline size_t sl__skip_string(const uint8_t *s, size_t pos) {
  pos++;
  for (;;) {
    if (s[pos] == '\\') pos += 2;
    else if (s[pos] == '"') return pos + 1;
    else pos++;
  }
}

/* The index just past the validated value starting at v.p[pos]: from the skip index when
 * there is one, else by scanning. */
static inline size_t sl__skip_value(sl_value v, size_t pos) {
  const uint8_t *s = v.p;
  size_t n = v.n;
  uint8_t b = s[pos];
  if (v.doc && (b == '"' || b == '{' || b == '[')) {
    size_t offset = (size_t)(s - v.doc->base);
    return v.doc->ends[offset + pos] - offset;
  }
  if (b == '"') return sl__skip_string(s, pos);
  if (b == '{' || b == '[') {
    size_t depth = 0;
    for (;;) {
      b = s[pos];
      if (b == '"') {
        pos = sl__skip_string(s, pos);
        continue;
      }
      if (b == '{' || b == '[') depth++;
      if ((b == '}' || b == ']') && --depth == 0) return pos + 1;
      pos++;
    }
  }
  while (pos < n && s[pos] != ',' && s[pos] != '}' && s[pos] != ']' && s[pos] != ' ' && s[pos] != '\t' &&
         s[pos] != '\n' && s[pos] != '\r')
    pos++;
  return pos;
}

/* Iterates the elements of an array or the members of an object (empty for other kinds). */
typedef struct {
  sl_value container;
  size_t pos;
} sl_iter;

static inline sl_iter sl_items(sl_value container) {
  sl_kind kind = sl_kind_of(container);
  sl_iter it = {container, kind == SL_ARRAY || kind == SL_OBJECT ? 1 : container.n};
  return it;
}

static inline bool sl_next_item(sl_iter *it, sl_value *item) {
  const uint8_t *s = it->container.p;
  size_t n = it->container.n;
  size_t start = sl__skip_ws(s, n, it->pos);
  if (start >= n || s[start] == ']' || s[start] == '}') {
    it->pos = n;
    return false;
  }
  size_t end = sl__skip_value(it->container, start);
  it->pos = sl__skip_ws(s, n, end) + 1;
  item->p = s + start;
  item->n = end - start;
  item->doc = it->container.doc;
  return true;
}

/* For objects: the next key (a string value, quotes included) and its value. */
static inline bool sl_next_member(sl_iter *it, sl_value *key, sl_value *value) {
  if (sl_kind_of(it->container) != SL_OBJECT || !sl_next_item(it, key)) return false;
  const uint8_t *s = it->container.p;
  size_t n = it->container.n;
  /* sl_next_item stepped over the ':' as if it were a comma; the value starts after it. */
  size_t start = sl__skip_ws(s, n, key->p - s + key->n);
  start = sl__skip_ws(s, n, start + 1);
  size_t end = sl__skip_value(it->container, start);
  it->pos = sl__skip_ws(s, n, end) + 1;
  value->p = s + start;
  value->n = end - start;
  value->doc = it->container.doc;
  return true;
}

/* ---- strings ------------------------------------------------------------------------------- */

/* The decoded UTF-8 bytes of a string value, one at a time. */
typedef struct {
  const uint8_t *raw;
  size_t n, pos;
  uint8_t pending[4];
  uint8_t pending_pos, pending_len;
} sl_str_iter;

static inline sl_str_iter sl_str_bytes(sl_value str) {
  sl_str_iter it = {0, 0, 0, {0, 0, 0, 0}, 0, 0};
  if (sl_kind_of(str) == SL_STRING) {
    it.raw = str.p + 1;
    it.n = str.n - 2;
  }
  return it;
}

/* The next decoded byte, or -1 at the end. */
static inline int sl_str_next(sl_str_iter *it) {
  if (it->pending_pos < it->pending_len) return it->pending[it->pending_pos++];
  if (it->pos >= it->n) return -1;
  uint8_t b = it->raw[it->pos++];
  if (b != '\\') return b;
  uint8_t e = it->raw[it->pos++];
  switch (e) {
    case 'b': return 0x08;
    case 'f': return 0x0c;
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'u': break;
    default: return e;
  }
  uint32_t point = (uint32_t)sl__hex4(it->raw + it->pos);
  it->pos += 4;
  if (point >= 0xd800 && point <= 0xdbff) {
    uint32_t low = (uint32_t)sl__hex4(it->raw + it->pos + 2);
    it->pos += 6;
    point = 0x10000 + ((point - 0xd800) << 10) + (low - 0xdc00);
  }
  uint8_t len = point < 0x80 ? 1 : point < 0x800 ? 2 : point < 0x10000 ? 3 : 4;
  static const uint8_t lead[5] = {0, 0x00, 0xc0, 0xe0, 0xf0};
  for (uint8_t i = 1; i < len; i++) it->pending[i] = 0x80 | ((point >> (6 * (len - 1 - i))) & 0x3f);
  it->pending_pos = 1;
  it->pending_len = len;
  return lead[len] | (point >> (6 * (len - 1)));
}

/* Length of the decoded text in bytes (0 for non-strings). */
static inline size_t sl_str_len(sl_value str) {
  sl_str_iter it = sl_str_bytes(str);
  size_t len = 0;
  while (sl_str_next(&it) >= 0) len++;
  return len;
}

static inline bool sl_str_eq(sl_value str, const char *text) {
  if (sl_kind_of(str) != SL_STRING) return false;
  /* Fast path: a body without backslashes is its own decoded text. */
  size_t i = 1;
  while (i < str.n - 1 && str.p[i] != '\\' && text[i - 1] != 0 && str.p[i] == (uint8_t)text[i - 1]) i++;
  if (i == str.n - 1) return text[i - 1] == 0;
  if (str.p[i] != '\\') return false;
  sl_str_iter it = sl_str_bytes(str);
  for (;; text++) {
    int b = sl_str_next(&it);
    if (b < 0) return *text == 0;
    if (*text == 0 || (uint8_t)*text != b) return false;
  }
}

static inline bool sl_str_same(sl_value a, sl_value b) {
  sl_str_iter x = sl_str_bytes(a), y = sl_str_bytes(b);
  for (;;) {
    int p = sl_str_next(&x), q = sl_str_next(&y);
    if (p != q) return false;
    if (p < 0) return true;
  }
}

/* Decodes into buf; false when it does not fit (or str is not a string). */
static inline bool sl_str_copy(sl_value str, uint8_t *buf, size_t cap, size_t *len) {
  if (sl_kind_of(str) != SL_STRING) return false;
  sl_str_iter it = sl_str_bytes(str);
  size_t used = 0;
  for (int b; (b = sl_str_next(&it)) >= 0;) {
    if (used == cap) return false;
    buf[used++] = (uint8_t)b;
  }
  *len = used;
  return true;
}

/* The object member key (the last one when a key repeats, as JSON.parse does); missing if none. */
static inline sl_value sl_get(sl_value object, const char *key) {
  sl_value found = SL_MISSING_VALUE, name, value;
  sl_iter it = sl_items(object);
  while (sl_next_member(&it, &name, &value))
    if (sl_str_eq(name, key)) found = value;
  return found;
}

#endif
