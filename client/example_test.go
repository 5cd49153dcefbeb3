package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/zkgate/zkgate/client"
)

// Take a lease, hold a lock while doing the work it protects, and stop the
// work if the lease is lost. The examples read the gateway's address from
// ZKGATE_URL; TestExamples runs each against a real gateway.
func Example() {
	c, err := client.New(os.Getenv("ZKGATE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// The lease is the liveness of this process: it keeps itself alive
	// until Revoke, and everything it holds is released when it ends. One
	// lease per concurrent holder: a lease is one holder of each name.
	lease, err := c.Grant(ctx, 15*time.Second, "billing-worker-3")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Revoke(ctx)

	lock, err := lease.Lock(ctx, "invoices", client.Exclusive, 10*time.Second)
	if errors.Is(err, client.ErrTimeout) {
		fmt.Println("someone else holds invoices")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", lock.Name, "in mode", lock.Mode)

	// Work under lease.Context() stops when the lease is lost, at the
	// latest at lease.Deadline(); pass the fencing token to whatever the
	// lock protects.
	if err := writeInvoices(lease.Context(), c, lock); err != nil {
		log.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
}

// writeInvoices stands for the work a lock protects: storage that checks
// the fencing token before it accepts a write.
func writeInvoices(ctx context.Context, c *client.Client, lock *client.LockGrant) error {
	if err := c.Fence(ctx, lock.Name, lock.Token); err != nil {
		return fmt.Errorf("refusing the write: %w", err)
	}
	fmt.Println("the fencing token is current")
	return nil
}

// A consumer that acks what it handled and gives back what it could not.
func ExampleLease_Claim() {
	c, err := client.New(os.Getenv("ZKGATE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Produce(ctx, "emails", []byte("hello"), client.DefaultPriority); err != nil {
		log.Fatal(err)
	}
	lease, err := c.Grant(ctx, 15*time.Second, "mailer")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Revoke(ctx)
	for {
		item, err := lease.Claim(ctx, "emails", 200*time.Millisecond)
		if errors.Is(err, client.ErrEmpty) {
			fmt.Println("no more mail")
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("sending %q\n", item.Data)
		if err := item.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
}

// Run for leader and follow the election as others see it.
func ExampleClient_WatchElection() {
	c, err := client.New(os.Getenv("ZKGATE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	w, err := c.WatchElection(ctx, "scheduler")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := c.Grant(ctx, 15*time.Second, "scheduler-1")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Revoke(context.Background())
	if _, err := lease.Lead(ctx, "scheduler", "10.0.0.5:8080", 30*time.Second); err != nil {
		log.Fatal(err)
	}
	for st := range w.C {
		if st.Leader == nil {
			fmt.Println("no leader")
			continue
		}
		fmt.Println("leader:", st.Leader.Value)
		if st.Leader.Lease == lease.ID() {
			break
		}
	}
	if err := lease.Resign(ctx, "scheduler"); err != nil {
		log.Fatal(err)
	}
}
