// The notification variable as notify.ts imports it; the operations contract itself lives in
// lib/workflow/operations.ts, which infra/ reads too. This file goes once notify.ts imports
// from there.

export { JOB_NOTIFICATIONS_TOPIC_ENV } from '../../lib/workflow/operations.ts';
