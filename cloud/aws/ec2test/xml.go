package ec2test

import (
	"bytes"
	"encoding/xml"
	"strconv"
	"time"
)

// Namespace is the EC2 API's XML namespace, on every answer's root.
const Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// node is one XML element: text or children.
type node struct {
	name string
	text string
	kids []node
}

func el(name string, kids ...node) node { return node{name: name, kids: kids} }
func tx(name, text string) node         { return node{name: name, text: text} }
func num(name string, v int) node       { return tx(name, strconv.Itoa(v)) }
func tm(name string, t time.Time) node  { return tx(name, t.UTC().Format("2006-01-02T15:04:05.000Z")) }
func usd(name string, v float64) node   { return tx(name, strconv.FormatFloat(v, 'f', -1, 64)) }

// items wraps nodes as the <item> members of a list element.
func items(name string, members []node) node {
	for i := range members {
		members[i].name = "item"
	}
	return el(name, members...)
}

func (n node) write(b *bytes.Buffer) {
	b.WriteByte('<')
	b.WriteString(n.name)
	b.WriteByte('>')
	if len(n.kids) == 0 {
		_ = xml.EscapeText(b, []byte(n.text))
	}
	for _, k := range n.kids {
		k.write(b)
	}
	b.WriteString("</")
	b.WriteString(n.name)
	b.WriteByte('>')
}

// document renders an action's answer: <ActionResponse xmlns=…> with a
// requestId and the given members.
func document(action, requestID string, members ...node) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString("<" + action + "Response xmlns=\"" + Namespace + "\">")
	tx("requestId", requestID).write(&b)
	for _, m := range members {
		m.write(&b)
	}
	b.WriteString("</" + action + "Response>")
	return b.Bytes()
}

// errorDocument renders EC2's error answer.
func errorDocument(code, message, requestID string) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString("<Response><Errors><Error>")
	tx("Code", code).write(&b)
	tx("Message", message).write(&b)
	b.WriteString("</Error></Errors>")
	tx("RequestID", requestID).write(&b)
	b.WriteString("</Response>")
	return b.Bytes()
}
