// File system errors that say a path a process was given (its data dir, a file it keeps there)
// cannot be used as it is: a file where a directory goes, no permission, a read-only mount. No
// restart fixes them, so each process reports one in a line saying what to do instead of a bare
// errno or a stack trace. (Shared by both processes; the runner imports no runtime code.)

const UNUSABLE_PATH_CODES: ReadonlySet<string> = new Set(['ENOTDIR', 'EISDIR', 'EACCES', 'EPERM', 'EROFS', 'ELOOP', 'ENAMETOOLONG', 'EEXIST']);

/** Whether `error` is a file system error that says its path cannot be used as it is. */
export function isUnusablePathError(error: unknown): error is NodeJS.ErrnoException {
  const code: unknown = (error as { code?: unknown } | null)?.code;
  return error instanceof Error && typeof code === 'string' && UNUSABLE_PATH_CODES.has(code);
}

/** What to print for such an error met with the data dir `dataDir`: its own words, then what to do. */
export const unusablePathAdvice = (dataDir: string, error: NodeJS.ErrnoException): string =>
  `The data dir ${dataDir} cannot be used: ${error.message}. Fix its ownership, permissions or path and start again.`;
