// Header lookup for requests whose header names may come in any case.

/** The value of header `name` (lowercase), whatever case the request spelled it in. */
export function headerValue(headers: Readonly<Record<string, string | undefined>>, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === name) return value;
  return undefined;
}
