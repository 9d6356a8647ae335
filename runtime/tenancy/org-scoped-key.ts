// The in-memory key of something an org names (a run, a schedule, a device) in maps and timer
// heaps: the org id and the name joined by a NUL, which neither may contain.

export const orgScopedKey = (orgId: string, name: string): string => `${orgId}\u0000${name}`;

/** The org id and the name an orgScopedKey was made from. */
export const orgScopedParts = (key: string): [orgId: string, name: string] => key.split('\u0000') as [string, string];
