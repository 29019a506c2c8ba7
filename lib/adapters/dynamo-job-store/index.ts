// The job store on DynamoDB: the store (store.ts), its items and keys (items.ts), and the
// one way it writes under a condition (write.ts, conditions.ts).
export { DynamoJobStore, type DynamoJobStoreOptions } from './store.ts';
export { jobPk } from './items.ts';
