// The API layer: one entry point, its request/response types, and the route table.
export { handleApiRequest, MAX_BODY_BYTES } from './handle.ts';
export { headerValue } from './headers.ts';
export { INTERNAL_ERROR_MESSAGE, UNAUTHORIZED_MESSAGE } from './responses.ts';
export { IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAY_HEADER, MAX_IDEMPOTENCY_KEY_LENGTH } from './idempotency-key.ts';
export { matchRoute, ROUTES, type HttpMethod, type Route, type RouteAuth, type RouteName } from './routes.ts';
export type { ApiDeps, ApiRequest, ApiResponse } from './types.ts';
