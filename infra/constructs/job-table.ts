// JobTable: the one DynamoDB table (DESIGN.md section 5), keys and indexes from lib/workflow/job-table.ts.

import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { TABLE_INDEXES, TABLE_KEY, TTL_ATTRIBUTE } from '../../lib/workflow/job-table.ts';

/** Options of the jobs table. */
export interface JobTableProps {
  /**
   * What happens to the table when the stack is deleted. Jobs, attempts and exit codes
   * are the record users audit, so the default keeps them.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * Refuse DeleteTable until this is turned off.
   * @default true
   */
  readonly deletionProtection?: boolean;
  /**
   * Days of point-in-time recovery (1-35).
   * @default 35
   */
  readonly pointInTimeRecoveryDays?: number;
}

/** The jobs table: on-demand, point-in-time recovery, AWS-managed encryption, retained. */
export class JobTable extends Construct {
  readonly table: dynamodb.Table;

  constructor(scope: Construct, id: string, props: JobTableProps = {}) {
    super(scope, id);
    const days = props.pointInTimeRecoveryDays ?? 35;
    if (!Number.isInteger(days) || days < 1 || days > 35) {
      throw new Error(`JobTable pointInTimeRecoveryDays: expected an integer 1-35, got ${days}`);
    }
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: TABLE_KEY.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: TABLE_KEY.sortKey, type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true, recoveryPeriodInDays: days },
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      deletionProtection: props.deletionProtection ?? true,
      // Lapsed idempotency claims are deleted by DynamoDB; no job item carries the attribute.
      timeToLiveAttribute: TTL_ATTRIBUTE,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    });
    for (const index of TABLE_INDEXES) {
      this.table.addGlobalSecondaryIndex({
        indexName: index.indexName,
        partitionKey: { name: index.partitionKey, type: dynamodb.AttributeType.STRING },
        sortKey: { name: index.sortKey, type: dynamodb.AttributeType.STRING },
        projectionType: dynamodb.ProjectionType[index.projection],
      });
    }
  }
}
