// How many characters a text holds, as a person counts them and as ajv's maxLength does (JSON
// Schema counts code points): a surrogate pair is one character, where String#length says two.
// The hand-written caps (a projection's title, status and entity_id) count this way too, so 40
// emoji fit a 40-character status as 40 letters do.

/** Code points in `text` (a lone surrogate counts as one). */
export function characterCount(text: string): number {
  let count = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        count -= 1;
        i += 1;
      }
    }
  }
  return count;
}
