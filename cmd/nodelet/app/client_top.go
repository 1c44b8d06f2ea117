package app

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// newTopCmd is `nodelet top pods [NAME] [-A] [--containers]` and `nodelet top node`, from the
// agent's /stats/summary: CPU in millicores, memory as working set.
func newTopCmd() *cobra.Command {
	var cf clientFlags
	var containers, noHeaders bool
	cmd := &cobra.Command{
		Use:   "top pods|node [NAME]",
		Short: "Show CPU and memory use of pods or the node (like kubectl top)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var sum statsapi.Summary
			if err := c.GetJSON(cmd.Context(), "/stats/summary", nil, &sum); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch strings.ToLower(args[0]) {
			case "pods", "pod", "po":
				name := ""
				if len(args) == 2 {
					name = args[1]
				}
				return topPods(out, cmd.ErrOrStderr(), &sum, cf.namespace, cf.allNS, name, containers, noHeaders)
			case "node", "nodes", "no":
				return topNode(out, &sum, noHeaders)
			}
			return fmt.Errorf("top knows pods and node, not %q", args[0])
		},
	}
	cf.bind(cmd, true)
	cmd.Flags().BoolVar(&containers, "containers", false, "show each container of the pods")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "leave out the header line")
	return cmd
}

func millicores(cpu *statsapi.CPUStats) string {
	if cpu == nil || cpu.UsageNanoCores == nil {
		return "<unknown>"
	}
	return fmt.Sprintf("%dm", *cpu.UsageNanoCores/1_000_000)
}

func mebibytes(mem *statsapi.MemoryStats) string {
	if mem == nil || mem.WorkingSetBytes == nil {
		return "<unknown>"
	}
	return fmt.Sprintf("%dMi", *mem.WorkingSetBytes/(1<<20))
}

func topPods(w, errOut io.Writer, sum *statsapi.Summary, ns string, allNS bool, name string, containers, noHeaders bool) error {
	var pods []statsapi.PodStats
	for _, p := range sum.Pods {
		if (allNS || p.PodRef.Namespace == ns) && (name == "" || p.PodRef.Name == name) {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		if name != "" {
			return fmt.Errorf("pods %q not found", name)
		}
		if allNS {
			fmt.Fprintln(errOut, "No resources found")
		} else {
			fmt.Fprintf(errOut, "No resources found in %s namespace.\n", ns)
		}
		return nil
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].PodRef.Namespace != pods[j].PodRef.Namespace {
			return pods[i].PodRef.Namespace < pods[j].PodRef.Namespace
		}
		return pods[i].PodRef.Name < pods[j].PodRef.Name
	})
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if !noHeaders {
		h := "NAME\tCPU(cores)\tMEMORY(bytes)"
		if containers {
			h = "POD\tNAME\tCPU(cores)\tMEMORY(bytes)"
		}
		if allNS {
			h = "NAMESPACE\t" + h
		}
		fmt.Fprintln(tw, h)
	}
	for _, p := range pods {
		prefix := ""
		if allNS {
			prefix = p.PodRef.Namespace + "\t"
		}
		if !containers {
			fmt.Fprintf(tw, "%s%s\t%s\t%s\n", prefix, p.PodRef.Name, millicores(p.CPU), mebibytes(p.Memory))
			continue
		}
		for _, c := range p.Containers {
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", prefix, p.PodRef.Name, c.Name, millicores(c.CPU), mebibytes(c.Memory))
		}
	}
	return tw.Flush()
}

func topNode(w io.Writer, sum *statsapi.Summary, noHeaders bool) error {
	n := sum.Node
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if !noHeaders {
		fmt.Fprintln(tw, "NAME\tCPU(cores)\tMEMORY(bytes)\tMEMORY%")
	}
	memPct := "<unknown>"
	if m := n.Memory; m != nil && m.WorkingSetBytes != nil && m.AvailableBytes != nil {
		total := *m.WorkingSetBytes + *m.AvailableBytes
		if total > 0 {
			memPct = fmt.Sprintf("%d%%", *m.WorkingSetBytes*100/total)
		}
	}
	name := n.NodeName
	if name == "" {
		name = "<unknown>"
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, millicores(n.CPU), mebibytes(n.Memory), memPct)
	return tw.Flush()
}
